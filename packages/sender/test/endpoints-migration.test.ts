// @module-tag postgres
// @module-tag pglite
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kysely, Migrator, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { migrationProvider } from '../src/db/migrations.js';
import { pgliteDialect } from '../src/db/pglite-pool.js';
import { PGliteThread } from '../src/db/pglite-thread.js';
import type { Schema } from '../src/db/schema.js';
import { openDatabase } from '../src/index.js';
import { dropSchema, TEST_DATABASE_URL } from './fixtures/storage.js';

// Migration 0012 on a database made with the schema before it: the webhook URLs each business had
// in its settings become endpoints that take every event and sign with the business's secrets, in
// the order of the list; a business without URLs gets none; nothing else changes.

const PREVIOUS = '0011_dashboard_sessions';

/** Settings as the previous version stored them. */
async function seed(db: Kysely<Schema>): Promise<void> {
  await sql`insert into account_settings (business_id, mode, require_mfa, webhook_urls) values
    ('biz-old', 'test', true, '["https://one.example/hooks", "https://two.example/hooks", "https://one.example/hooks"]'::jsonb),
    ('biz-old', 'live', false, '["https://live.example/"]'::jsonb),
    ('biz-none', 'test', false, '[]'::jsonb)`.execute(db);
}

async function check(db: Kysely<Schema>): Promise<void> {
  const rows = await db
    .selectFrom('webhook_endpoints')
    .select(['business_id', 'mode', 'url', 'enabled_events', 'status', 'account_secrets', 'signature_scheme'])
    .orderBy('business_id')
    .orderBy('mode')
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  const common = { enabled_events: ['*'], status: 'enabled', account_secrets: true, signature_scheme: 'v1' };
  expect(rows).toEqual([
    { business_id: 'biz-old', mode: 'live', url: 'https://live.example/', ...common },
    { business_id: 'biz-old', mode: 'test', url: 'https://one.example/hooks', ...common },
    { business_id: 'biz-old', mode: 'test', url: 'https://two.example/hooks', ...common },
    { business_id: 'biz-old', mode: 'test', url: 'https://one.example/hooks', ...common },
  ]);
  const settings = await db.selectFrom('account_settings').select(['business_id', 'require_mfa']).execute();
  expect(settings).toHaveLength(3);
}

describe('migration 0012 on a database of the previous schema', { timeout: 120_000 }, () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups) await cleanup();
  });

  it('turns the webhook URLs of PGlite settings into endpoints', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'payhook-migrate-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const dataDir = join(dir, 'data');
    const pglite = await PGliteThread.open(dataDir);
    const old = new Kysely<Schema>({ dialect: pgliteDialect(pglite) });
    const { error } = await new Migrator({ db: old, provider: migrationProvider }).migrateTo(PREVIOUS);
    expect(error).toBeUndefined();
    await seed(old);
    await old.destroy();
    if (!pglite.closed) await pglite.close();
    const database = await openDatabase({ dataDir });
    try {
      await check(database.db);
    } finally {
      await database.close();
    }
  });

  it('turns the webhook URLs of PostgreSQL settings into endpoints', async () => {
    const schema = `payhook_migrate_${process.pid}_${Date.now()}`;
    cleanups.push(() => dropSchema(schema));
    const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await admin.connect();
    await admin.query(`create schema ${schema}`);
    await admin.end();
    const old = new Kysely<Schema>({
      dialect: new PostgresDialect({
        pool: new pg.Pool({
          connectionString: TEST_DATABASE_URL,
          options: `-c search_path=${schema}`,
          max: 1,
        }),
      }),
    });
    const { error } = await new Migrator({
      db: old,
      provider: migrationProvider,
      migrationTableSchema: schema,
    }).migrateTo(PREVIOUS);
    expect(error).toBeUndefined();
    await seed(old);
    await old.destroy();
    const database = await openDatabase({ url: TEST_DATABASE_URL, schema });
    try {
      await check(database.db);
    } finally {
      await database.close();
    }
  });
});
