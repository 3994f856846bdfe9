// @module-tag postgres
// @module-tag pglite
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CompiledQuery,
  Kysely,
  type KyselyPlugin,
  Migrator,
  PostgresDialect,
  PostgresQueryCompiler,
  sql,
} from 'kysely';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { PREPARE } from '../src/db/database.js';
import { migrationProvider } from '../src/db/migrations.js';
import { ONLINE_INDEXES } from '../src/db/online-indexes.js';
import { pgliteDialect } from '../src/db/pglite-pool.js';
import { PGliteThread } from '../src/db/pglite-thread.js';
import type { Schema } from '../src/db/schema.js';
import { buildApp, type Database, expireSessions, loadConfig, openDatabase } from '../src/index.js';
import { type AttemptRecord, recordAttemptsStatement } from '../src/internal.js';
import { type SeededHistory, seedHistory } from './fixtures/history.js';
import { dropSchema, TEST_DATABASE_URL, testStorages } from './fixtures/storage.js';

// A history at a size where a scan costs what an index does not, made with the schema of the
// previous version (migration 0013) and then migrated: the hourly counts of the attempts already
// recorded are backfilled, the indexes are built, the rows read back the same. Then each call an
// operator makes on a bad day runs through the API, and every statement it ran is explained on the
// seeded tables: none scans a table of the history, none reads more than a bounded number of rows.

const PREVIOUS = '0013_endpoint_failures';
const SIZE = { payments: 8000, days: 14, others: 100, otherEvents: 100 };
const HISTORY_TABLES = new Set([
  'events',
  'deliveries',
  'delivery_attempts',
  'payments',
  'endpoint_attempt_hours',
]);
/** Rows a statement may read from those tables: a batch of recover's, not a scan of 26,000 events. */
const ROWS_READ_BOUND = 12_000;
const KEY = 'sk_test_history';

/** Records every statement run through the Kysely it is plugged into. */
class Statements implements KyselyPlugin {
  readonly seen: CompiledQuery[] = [];
  readonly #compiler = new PostgresQueryCompiler();
  transformQuery: KyselyPlugin['transformQuery'] = (args) => {
    this.seen.push(this.#compiler.compileQuery(args.node, args.queryId));
    return args.node;
  };
  transformResult: KyselyPlugin['transformResult'] = async (args) => args.result;
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}

/** The scans of history tables in a plan, with the rows each read. */
function scans(node: PlanNode, out: { table: string; type: string; index?: string; read: number }[] = []) {
  if (node['Relation Name'] && HISTORY_TABLES.has(node['Relation Name'])) {
    const loops = node['Actual Loops'] ?? 1;
    const read = ((node['Actual Rows'] ?? 0) + (node['Rows Removed by Filter'] ?? 0)) * loops;
    out.push({ table: node['Relation Name'], type: node['Node Type'], index: node['Index Name'], read });
  }
  for (const child of node.Plans ?? []) scans(child, out);
  return out;
}

/** Explains (and runs, rolled back) each statement that reads or writes a history table. */
async function explainAll(db: Kysely<Schema>, statements: readonly CompiledQuery[]) {
  const found: { sql: string; table: string; type: string; index?: string; read: number }[] = [];
  for (const statement of statements) {
    const text = statement.sql.replace(PREPARE, '').trim();
    if (!/^(select|with|update|delete|insert)\b/i.test(text)) continue;
    if (![...HISTORY_TABLES].some((t) => text.includes(t))) continue;
    // Run, then rolled back; a write that cannot run twice (a key it made) is explained unrun.
    const plan =
      (await explainOnce(db, `explain (analyze, format json) ${text}`, statement.parameters).catch(
        () => null,
      )) ?? (await explainOnce(db, `explain (format json) ${text}`, statement.parameters));
    for (const scan of scans(plan)) found.push({ sql: text.slice(0, 160), ...scan });
  }
  return found;
}

/** The plan of one EXPLAIN, in a transaction rolled back. */
async function explainOnce(
  db: Kysely<Schema>,
  text: string,
  parameters: readonly unknown[],
): Promise<PlanNode> {
  let plan: unknown;
  await db
    .transaction()
    .execute(async (tx) => {
      const { rows } = await tx
        .withoutPlugins()
        .executeQuery<{ 'QUERY PLAN': unknown }>(CompiledQuery.raw(text, [...parameters]));
      plan = rows[0]?.['QUERY PLAN'];
      throw new Rollback();
    })
    .catch((error: unknown) => {
      if (!(error instanceof Rollback)) throw error;
    });
  const parsed = (typeof plan === 'string' ? JSON.parse(plan) : plan) as [{ Plan: PlanNode }];
  return parsed[0].Plan;
}

class Rollback extends Error {}

describe.each(testStorages())('a provider history on %s', { timeout: 300_000 }, (storage) => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  /** A database of the previous schema, seeded, then opened (migrated) by this version. */
  async function migratedHistory(now: Date): Promise<{ database: Database; seeded: SeededHistory }> {
    let old: Kysely<Schema>;
    let open: () => Promise<Database>;
    if (storage === 'pglite') {
      const dir = await mkdtemp(join(tmpdir(), 'payhook-history-'));
      cleanups.push(() => rm(dir, { recursive: true, force: true }));
      const pglite = await PGliteThread.open(join(dir, 'data'));
      old = new Kysely<Schema>({ dialect: pgliteDialect(pglite) });
      open = async () => {
        if (!pglite.closed) await pglite.close();
        return openDatabase({ dataDir: join(dir, 'data') });
      };
    } else {
      const schema = `payhook_history_${process.pid}_${Date.now()}`;
      cleanups.push(() => dropSchema(schema));
      const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
      await admin.connect();
      await admin.query(`create schema ${schema}`);
      await admin.end();
      old = new Kysely<Schema>({
        dialect: new PostgresDialect({
          pool: new pg.Pool({
            connectionString: TEST_DATABASE_URL,
            options: `-c search_path=${schema}`,
            max: 1,
          }),
        }),
      });
      open = () => openDatabase({ url: TEST_DATABASE_URL, schema });
    }
    const { error } = await new Migrator({
      db: old,
      provider: migrationProvider,
      ...(storage === 'postgres' ? { migrationTableSchema: (await currentSchema(old)) as string } : {}),
    }).migrateTo(PREVIOUS);
    expect(error).toBeUndefined();
    const seeded = await seedHistory(old, SIZE, now);
    await old.destroy();
    const database = await open();
    cleanups.push(() => database.close());
    return { database, seeded };
  }

  it('migrates on: hourly counts backfilled from the attempts, indexes built, rows read back the same; every call reads by index', async () => {
    const now = new Date();
    const { database, seeded } = await migratedHistory(now);
    const { db } = database;

    // The counts of the last 8 days are those of the attempts.
    const { rows: expected } = await sql<{ hour: Date; attempts: number; succeeded: number }>`
      select to_timestamp(floor(extract(epoch from a.started_at) / 3600) * 3600) as hour, count(*)::int as attempts,
             count(*) filter (where a.status_code = 200)::int as succeeded
      from delivery_attempts a join deliveries d on d.id = a.delivery_id
      where d.endpoint_id = ${seeded.endpointId}::uuid and a.started_at >= now() - interval '8 days'
      group by 1 order by 1`.execute(db);
    const counted = await db
      .selectFrom('endpoint_attempt_hours')
      .select(['hour', 'attempts', 'succeeded'])
      .where('endpoint_id', '=', seeded.endpointId)
      .orderBy('hour')
      .execute();
    expect(counted.length).toBeGreaterThan(150);
    // The backfill's window starts at its own now(): the first hour may be cut differently.
    expect(counted.slice(1)).toEqual(expected.slice(expected.length - counted.length + 1));
    for (const index of ONLINE_INDEXES) {
      const { rows } = await sql<{ valid: boolean }>`select i.indisvalid as valid from pg_index i
        join pg_class c on c.oid = i.indexrelid where c.relname = ${index.name}
          and pg_table_is_visible(c.oid)`.execute(db);
      expect(rows, index.name).toEqual([{ valid: true }]);
    }

    const statements = new Statements();
    const app = await buildApp({
      database: { ...database, db: db.withPlugin(statements) },
      config: loadConfig({ PAYHOOK_API_KEYS: `${KEY}:${seeded.businessId}:test` }),
      logger: false,
    });
    cleanups.push(() => app.close());
    const call = async (method: string, url: string, body?: unknown) => {
      const res = await app.inject({
        method: method as 'GET',
        url,
        headers: { authorization: `Bearer ${KEY}` },
        ...(body === undefined ? {} : { payload: body as object }),
      });
      expect(res.statusCode, `${method} ${url}: ${res.body}`).toBeLessThan(300);
      return res.json();
    };
    // Data written by the previous version reads back: the oldest payment's two events.
    const oldest = await call('GET', `/events?payment_id=${seeded.oldestPaymentId}`);
    expect(oldest.data.map((e: { type: string }) => e.type).sort()).toEqual([
      'payment.session.created',
      'payment.session.succeeded',
    ]);
    await call('GET', `/events?payment_id=${seeded.newestPaymentId}`);
    // The list, its first page and one further on.
    const first = await call('GET', '/events?limit=100');
    await call('GET', `/events?limit=100&after=${first.pagination.after}`);
    // Another business's backlog: its URL down, 2,000 deliveries pending. The pending list of this
    // business reads its own pending deliveries, never those.
    await sql`with ep as (insert into webhook_endpoints (business_id, mode, url, created_at, updated_at)
        select business_id, mode, 'https://down.example/backlog', now(), now() from events
        where business_id <> ${seeded.businessId} limit 1 returning id, business_id, mode)
      insert into deliveries (event_id, url, status, next_attempt_at, endpoint_id)
      select e.id, 'https://down.example/backlog', 'pending', now() + interval '1 hour', ep.id
      from ep join events e on e.business_id = ep.business_id and e.mode = ep.mode
      cross join generate_series(1, 20) copy`.execute(db);
    // The rare statuses read their deliveries' events, not the business's events until a page
    // fills: no statement reads more events than there are such deliveries (failures are old, so a
    // walk of the newest events first reads many before the first).
    for (const status of ['failed', 'pending'] as const) {
      const from = statements.seen.length;
      const page = await call('GET', `/events?delivery_status=${status}&limit=100`);
      expect(page.data.length, status).toBeGreaterThan(0);
      expect(new Set(page.data.map((e: { delivery_status: string }) => e.delivery_status))).toEqual(
        new Set([status]),
      );
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from deliveries
        where status = ${status} and (status = 'pending' or superseded_by is null)`.execute(db);
      const reads = (await explainAll(db, statements.seen.slice(from)))
        .filter((scan) => scan.table === 'events')
        .map((scan) => scan.read);
      expect(Math.max(...reads), status).toBeLessThanOrEqual(rows[0]?.n as number);
      if (status === 'pending') {
        const { rows: own } = await sql<{ n: number }>`select count(*)::int as n from deliveries d
          join events e on e.id = d.event_id
          where d.status = 'pending' and e.business_id = ${seeded.businessId}`.execute(db);
        // Each listed event's own deliveries are read for its status (deliveries_event); the
        // pending deliveries read to find the events are this business's alone.
        const found = (await explainAll(db, statements.seen.slice(from))).filter(
          (scan) => scan.table === 'deliveries' && scan.index !== 'deliveries_event',
        );
        expect(found.length).toBeGreaterThan(0);
        expect(own[0]?.n).toBeLessThan((rows[0]?.n as number) - 1000);
        expect(Math.max(...found.map((scan) => scan.read)), 'deliveries read').toBeLessThanOrEqual(
          own[0]?.n as number,
        );
      }
    }
    // No delivery to a webhook URL: the events the previous version wrote so were marked as the
    // migration went on, and the list reads those alone, the newest first.
    const { rows: bare } = await sql<{ id: string }>`select id from events e
      where business_id = ${seeded.businessId} and not exists (select from deliveries d where d.event_id = e.id)
      order by created_at desc, id desc`.execute(db);
    expect(bare.length).toBeGreaterThan(0);
    const from = statements.seen.length;
    const none = await call('GET', '/events?delivery_status=none&limit=100');
    expect(none.data.map((e: { id: string }) => e.id)).toEqual(bare.slice(0, 100).map((r) => r.id));
    const noneReads = (await explainAll(db, statements.seen.slice(from)))
      .filter((scan) => scan.table === 'events')
      .map((scan) => scan.read);
    expect(Math.max(...noneReads)).toBeLessThanOrEqual(bare.length);
    const stats = await call('GET', `/webhook-endpoints/${seeded.endpointId}/stats?window=7d`);
    expect(
      stats.data.buckets.reduce((n: number, b: { attempts: number }) => n + b.attempts, 0),
    ).toBeGreaterThan(0);
    await call('GET', `/webhook-endpoints/${seeded.endpointId}/stats?window=24h`);
    const health = await call('GET', '/accounts/webhook-health');
    const healthOf = (url: string) => health.data.find((h: { url: string }) => h.url === url);
    expect(healthOf('https://hooks.example/history').attempts).toBeGreaterThan(0);
    expect(healthOf('https://hooks.example/history').p50_latency_ms).toBeGreaterThanOrEqual(40);
    expect(healthOf('https://spare.example/history')).toMatchObject({ attempts: 0, pending: 20 });
    const since = new Date(now.getTime() - 13 * 86_400_000).toISOString();
    const recovered = await call('POST', `/webhook-endpoints/${seeded.endpointId}/recover`, { since });
    expect(recovered.data.queued).toBeGreaterThan(0);
    await call('DELETE', `/webhook-endpoints/${seeded.spareEndpointId}`);
    await expireSessions({ ...database, db: db.withPlugin(statements) }, now);

    // The worker's record of a delivery failing for good, which marks its event: one of those the
    // recovery just queued, claimed here.
    const { rows: claimed } = await sql<{ id: string; token: string; url: string }>`update deliveries
      set claim_token = gen_random_uuid()
      where id = (select id from deliveries where endpoint_id = ${seeded.endpointId}::uuid and status = 'pending'
        and claim_token is null limit 1)
      returning id, claim_token as token, url`.execute(db);
    expect(claimed).toHaveLength(1);
    const failing = {
      claim: claimed[0],
      attempts: 11,
      first: now,
      next: null,
      status: 'failed',
      startedAt: now,
      outcome: {
        ok: false,
        statusCode: 500,
        latencyMs: 40,
        responseBody: null,
        error: { code: 'http_5xx', message: '500' },
      },
    } as unknown as AttemptRecord;
    statements.seen.push(recordAttemptsStatement([failing], now.toISOString()).compile(db));
    // The events' delivery marks are kept by the statements above (the recovery clears failed marks
    // and no_webhook, the deletion and the record mark events failed): their plans are among those
    // checked below.
    for (const mark of [
      'set failed_delivery = false',
      'set failed_delivery = true',
      'set no_webhook = false',
    ]) {
      expect(
        statements.seen.some((q) => q.sql.includes(mark)),
        mark,
      ).toBe(true);
    }
    const found = await explainAll(db, statements.seen);
    expect(found.length).toBeGreaterThan(10);
    // The hourly counts may be scanned where the table is small: their size is the endpoints'
    // hours, not the traffic, and the bound below holds them too.
    expect(found.filter((s) => s.type === 'Seq Scan' && s.table !== 'endpoint_attempt_hours')).toEqual([]);
    expect(found.filter((s) => s.read > ROWS_READ_BOUND)).toEqual([]);
  });
});

async function currentSchema(db: Kysely<Schema>): Promise<string> {
  const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(db);
  return rows[0]?.schema as string;
}
