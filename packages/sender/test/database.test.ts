// @module-tag postgres
// @module-tag pglite
// @module-tag process
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { copyPgliteTemplate } from '../../../test/support/pglite-template.js';
import { appliedMigrations, DataDirLockedError, openDatabase } from '../src/index.js';

import { dropSchema, openTestDatabase, TEST_DATABASE_URL } from './fixtures/storage.js';

const MIGRATIONS = [
  '0001_keys_and_settings',
  '0002_customers',
  '0003_beneficiaries',
  '0004_payments_and_outbox',
  '0005_capture',
  '0006_idempotency_keys',
  '0007_delivery',
  '0008_attempt_key',
  '0009_signing_secrets',
  '0010_delivery_instances',
  '0011_dashboard_sessions',
  '0012_webhook_endpoints',
  '0013_endpoint_failures',
  '0014_endpoint_attempt_hours',
  '0015_endpoint_history',
  '0016_event_delivery_marks',
];
const holder = fileURLToPath(new URL('./fixtures/hold-data-dir.mjs', import.meta.url));
const dirs: string[] = [];
const schemas: string[] = [];

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'payhook-pglite-'));
  dirs.push(dir);
  return join(dir, 'data');
}

/** A data directory holding a migrated, empty database, for the tests that are not of a first start. */
async function migratedDir(): Promise<string> {
  const dataDir = await tempDir();
  await copyPgliteTemplate(dataDir);
  return dataDir;
}

afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  for (const schema of schemas) await dropSchema(schema);
});

async function reachPostgres(): Promise<void> {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.end();
  } catch (error) {
    throw new Error(
      `Cannot reach the test PostgreSQL at ${TEST_DATABASE_URL} (${(error as Error).message}). Start it, or set TEST_DATABASE_URL.`,
    );
  }
}

describe('openDatabase', { timeout: 60_000 }, () => {
  it('migrates a fresh PGlite directory, and reopens it without migrating twice', async () => {
    const dataDir = await tempDir();
    const first = await openDatabase({ dataDir });
    expect(first.kind).toBe('pglite');
    expect(await appliedMigrations(first.db)).toEqual(MIGRATIONS);
    await first.db
      .insertInto('api_keys')
      .values({ business_id: 'b1', mode: 'test', key_hash: 'h1', key_prefix: 'pk_t' })
      .execute();
    await first.close();
    const again = await openDatabase({ dataDir });
    expect(await appliedMigrations(again.db)).toEqual(MIGRATIONS);
    expect(await again.db.selectFrom('api_keys').select('business_id').execute()).toEqual([
      { business_id: 'b1' },
    ]);
    await again.close();
  });

  it('runs transactions one at a time on PGlite, and rolls back a failed one', async () => {
    const { db, close } = await openDatabase({ dataDir: await migratedDir() });
    const insert = (hash: string) =>
      db.transaction().execute(async (tx) => {
        await tx
          .insertInto('api_keys')
          .values({ business_id: 'b', mode: 'test', key_hash: hash, key_prefix: 'p' })
          .execute();
        await tx
          .insertInto('api_keys')
          .values({ business_id: 'b', mode: 'test', key_hash: `${hash}-2`, key_prefix: 'p' })
          .execute();
      });
    await Promise.all(['a', 'b', 'c'].map(insert));
    // The second insert violates the unique key_hash: the whole transaction is undone.
    await expect(insert('a')).rejects.toThrow();
    const rows = await db.selectFrom('api_keys').select('key_hash').orderBy('key_hash').execute();
    expect(rows.map((r) => r.key_hash)).toEqual(['a', 'a-2', 'b', 'b-2', 'c', 'c-2']);
    await close();
  });

  it('refuses a second process on a locked PGlite directory, and opens after the holder is killed with -9', async () => {
    const dataDir = await migratedDir();
    const child = spawn(process.execPath, [holder, dataDir], { stdio: ['ignore', 'pipe', 'inherit'] });
    const [line] = (await once(
      createInterface({ input: child.stdout as NodeJS.ReadableStream }),
      'line',
    )) as [string];
    expect(line).toBe('ready');

    const refused = await openDatabase({ dataDir }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(DataDirLockedError);
    expect((refused as Error).message).toContain(String(child.pid));

    child.kill('SIGKILL');
    await once(child, 'exit');
    const reopened = await openDatabase({ dataDir });
    const rows = await reopened.db.selectFrom('api_keys').select('business_id').execute();
    expect(rows).toEqual([{ business_id: 'held' }]);
    await reopened.close();
  });

  it('migrates a fresh schema on the PostgreSQL server', async () => {
    await reachPostgres();
    const schema = `payhook_test_${process.pid}_${Date.now()}`;
    schemas.push(schema);
    const [a, b] = await Promise.all([
      openDatabase({ url: TEST_DATABASE_URL, schema }),
      openDatabase({ url: TEST_DATABASE_URL, schema }),
    ]);
    // Two instances starting at once apply the migration once.
    expect(await appliedMigrations(a.db)).toEqual(MIGRATIONS);
    expect(a.kind).toBe('postgres');
    await a.db
      .insertInto('account_settings')
      .values({
        business_id: 'b',
        mode: 'live',
        require_mfa: true,
        webhook_urls: JSON.stringify(['https://m.example/']),
      })
      .execute();
    expect(
      await b.db.selectFrom('account_settings').select(['webhook_urls', 'require_mfa']).execute(),
    ).toEqual([{ webhook_urls: ['https://m.example/'], require_mfa: true }]);
    await Promise.all([a.close(), b.close()]);
  });

  it('starts while other schemas on the same server are created and dropped', async () => {
    await reachPostgres();
    // The migrator once read every schema's tables, by name: a schema dropped meanwhile failed
    // this sender's start with "schema … does not exist".
    const churn = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await churn.connect();
    let churning = true;
    const other = `payhook_churn_${process.pid}_${Date.now()}`;
    const loop = (async () => {
      for (let i = 0; churning; i++) {
        await churn.query(`create schema ${other}_${i % 4}`);
        await churn.query(`create table ${other}_${i % 4}.t (id serial primary key, v text)`);
        await churn.query(`drop schema ${other}_${i % 4} cascade`);
      }
    })();
    try {
      for (let i = 0; i < 6; i++) {
        const schema = `payhook_start_${process.pid}_${Date.now()}_${i}`;
        schemas.push(schema);
        const database = await openDatabase({ url: TEST_DATABASE_URL, schema });
        expect(await appliedMigrations(database.db)).toEqual(MIGRATIONS);
        await database.close();
      }
    } finally {
      churning = false;
      await loop;
      await churn.end();
    }
  });

  it("runs the API's statements on at most poolSize connections, and refuses a size out of bounds", async () => {
    await reachPostgres();
    const schema = `payhook_pool_${process.pid}_${Date.now()}`;
    schemas.push(schema);
    const backends = async (poolSize?: number) => {
      const database = await openDatabase({
        url: TEST_DATABASE_URL,
        schema,
        ...(poolSize ? { poolSize } : {}),
      });
      try {
        // Nine statements at once, each holding its connection for 100 ms.
        const answers = await Promise.all(
          Array.from({ length: 9 }, () =>
            sql<{ pid: number }>`select pg_backend_pid() as pid, pg_sleep(0.1)`.execute(database.db),
          ),
        );
        return new Set(answers.map((answer) => answer.rows[0]?.pid)).size;
      } finally {
        await database.close();
      }
    };
    expect(await backends(3)).toBe(3);
    expect(await backends()).toBe(9);
    for (const poolSize of [0, 1.5, 1001]) {
      await expect(openDatabase({ url: TEST_DATABASE_URL, schema, poolSize })).rejects.toThrow(TypeError);
    }
  });

  it('refuses a schema name that is not a plain identifier', async () => {
    await expect(openDatabase({ url: TEST_DATABASE_URL, schema: 'x; drop table y' })).rejects.toThrow(
      TypeError,
    );
  });
});

describe.each(['postgres', 'pglite'] as const)('the delivery worker statements on %s', (storage) => {
  it('plan as index lookups even on a table too small for an index to pay, and leave other statements alone', async () => {
    if (storage === 'postgres') await reachPostgres();
    const { database, cleanup } = await openTestDatabase(storage, 'planner');
    try {
      const { db } = database;
      const event = randomUUID();
      await db
        .insertInto('events')
        .values({ id: event, business_id: 'b', mode: 'test', type: 't', payment_id: null, payload: '{}' })
        .execute();
      await sql`
        insert into deliveries (event_id, url)
        select ${event}::uuid, 'https://m.example/' from generate_series(1, 50)`.execute(db);
      await sql`analyze deliveries`.execute(db);
      // The shapes of the worker's claim (a walk of the due index, in its order) and of its
      // attempt records (deliveries joined by key to a batch of JSON rows).
      const claim = sql`
        select id from deliveries where status = 'pending' and next_attempt_at <= now()
        order by next_attempt_at limit 32 for update skip locked`;
      const record = sql`
        update deliveries d set attempts = d.attempts + 1
        from json_to_recordset(${JSON.stringify([{ id: randomUUID() }])}::json) as v(id uuid)
        where d.id = v.id`;
      const plan = async (run: (q: typeof claim) => Promise<{ rows: unknown[] }>, query: typeof claim) =>
        (await run(sql`explain ${query}`)).rows.map((r) => Object.values(r as object)[0]).join('\n');
      const plain = (q: typeof claim) => q.execute(db);
      const worker = (q: typeof claim) => database.delivery((wdb) => q.execute(wdb));

      // Fifty rows fit a page: the planner's own choice reads the whole table.
      expect(await plan(plain, record)).toMatch(/Seq Scan on deliveries/);
      expect(await plan(plain, claim)).not.toMatch(/Index Scan using deliveries_due/);
      // The worker's statements keep the plans that stay cheap however the table grows.
      const claimPlan = await plan(worker, claim);
      expect(claimPlan).toMatch(/Index Scan using deliveries_due/);
      expect(claimPlan).not.toMatch(/Seq Scan|Bitmap|Sort/);
      const recordPlan = await plan(worker, record);
      expect(recordPlan).toMatch(/Index Scan using deliveries_pkey/);
      expect(recordPlan).not.toMatch(/Seq Scan on deliveries|Hash Join|Merge Join/);
      // No LLVM compilation of a statement whose only plan includes a disabled step.
      expect((await database.delivery((wdb) => sql`show jit`.execute(wdb))).rows).toEqual([{ jit: 'off' }]);
      // On PGlite the settings are set around each worker statement and reset after it; the API's
      // statements on the same session keep their own.
      expect((await sql<{ enable_seqscan: string }>`show enable_seqscan`.execute(db)).rows).toEqual([
        { enable_seqscan: 'on' },
      ]);
    } finally {
      await cleanup();
    }
  }, 30_000); // a PGlite start, the schema and EXPLAIN of each statement: slow on a loaded machine
});
