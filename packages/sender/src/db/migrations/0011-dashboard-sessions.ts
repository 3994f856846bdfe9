import { type Kysely, sql } from 'kysely';
import { businessAndUncheckedMode } from './columns.js';

/** Migration 0011_dashboard_sessions, shipped: what it makes must never change; add the next. */
export async function up(db: Kysely<unknown>): Promise<void> {
  // A dashboard sign-in: the cookie's hash (the cookie itself is never stored), the key it was
  // made with (by hash: revoking the key ends the session), and its CSRF token.
  await db.schema
    .createTable('dashboard_sessions')
    .addColumn('id_hash', 'text', (c) => c.primaryKey())
    .addColumn('key_hash', 'text', (c) => c.notNull())
    .$call(businessAndUncheckedMode)
    .addColumn('csrf_token', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('dashboard_sessions_expires')
    .on('dashboard_sessions')
    .column('expires_at')
    .execute();
}
