// The inbox table: its DDL, as SQL for a merchant's own migrations and as the store's migrate().
import type { Pool, PoolClient } from 'pg';
import { checkIdentifier } from './options.js';

/** Where the inbox lives. */
export interface InboxLocation {
  /** Schema of the inbox table (default `payhook`). */
  schema?: string;
  /** Name of the inbox table (default `inbox`). */
  table?: string;
}

/** The quoted, schema-qualified name of the inbox table. */
export function qualifiedName(schema: string, table: string): string {
  return `"${schema}"."${table}"`;
}

/** The quoted, schema-qualified name of the inbox's table of objects (per-payment order). */
export function objectsName(schema: string, table: string): string {
  return `"${schema}"."${table}_objects"`;
}

/**
 * The SQL that creates the inbox (schema, the inbox table and its table of objects for per-payment
 * order, and their indexes), idempotent (`IF NOT EXISTS`
 * throughout): for a merchant who runs migrations with their own tool and creates the store with
 * `migrate: false`. Times are epoch milliseconds of the database server's clock, so instances whose
 * clocks disagree still agree on leases.
 *
 * @example
 * ```ts
 * import { inboxMigrationSql } from '@payhook/postgres';
 * // in a migration of your own (node-pg-migrate, Knex, Kysely, Drizzle...)
 * await db.query(inboxMigrationSql({ schema: 'payhook' }));
 * ```
 */
export function inboxMigrationSql(location: InboxLocation = {}): string {
  const schema = checkIdentifier('schema', location.schema ?? 'payhook');
  const table = checkIdentifier('table', location.table ?? 'inbox');
  const name = qualifiedName(schema, table);
  return `CREATE SCHEMA IF NOT EXISTS "${schema}";
CREATE TABLE IF NOT EXISTS ${name} (
  key text PRIMARY KEY,
  state text NOT NULL CHECK (state IN ('processing', 'done', 'failed')),
  owner text,
  lease_until bigint,
  payload text,
  business_id text,
  attempts integer NOT NULL,
  error text,
  received_at bigint NOT NULL,
  updated_at bigint NOT NULL,
  expires_at bigint NOT NULL,
  last_claim text NOT NULL
);
CREATE INDEX IF NOT EXISTS "${table}_lease_idx" ON ${name} (lease_until) WHERE state = 'processing';
CREATE INDEX IF NOT EXISTS "${table}_expires_idx" ON ${name} (expires_at);
CREATE TABLE IF NOT EXISTS ${objectsName(schema, table)} (
  id text PRIMARY KEY,
  rank double precision,
  holder text,
  holder_attempts integer,
  updated_at bigint NOT NULL,
  expires_at bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS "${table}_objects_expires_idx" ON ${objectsName(schema, table)} (expires_at);
`;
}

/**
 * Creates the inbox if missing (see {@link inboxMigrationSql}), in one transaction under an
 * advisory lock, so that instances starting together neither race nor fail. The store calls it on
 * first use unless created with `migrate: false`.
 *
 * @example
 * ```ts
 * import pg from 'pg';
 * import { migrateInbox } from '@payhook/postgres';
 * await migrateInbox(new pg.Pool({ connectionString: process.env.DATABASE_URL }), { schema: 'payhook' });
 * ```
 */
export async function migrateInbox(pool: Pool, location: InboxLocation = {}): Promise<void> {
  const sql = inboxMigrationSql(location);
  const client: PoolClient = await pool.connect();
  let broken: Error | undefined;
  const onBroken = (error: Error) => {
    broken = error;
  };
  client.on('error', onBroken);
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`payhook-inbox:${sql}`]);
    await client.query(sql);
    await client.query('COMMIT');
  } catch (error) {
    broken = error as Error;
    throw error;
  } finally {
    // A connection whose migration failed is closed rather than returned mid-transaction.
    client.off('error', onBroken);
    client.release(broken);
  }
}
