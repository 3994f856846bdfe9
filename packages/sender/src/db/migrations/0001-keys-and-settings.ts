import { type Kysely, sql } from 'kysely';
import { businessAndMode, createBusinessTable } from './columns.js';

/** Migration 0001_keys_and_settings, shipped: what it makes must never change; add the next. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await createBusinessTable(db, 'api_keys')
    .addColumn('key_hash', 'text', (c) => c.notNull().unique())
    .addColumn('key_prefix', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema
    .createTable('account_settings')
    .$call(businessAndMode)
    .addColumn('require_mfa', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('webhook_urls', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('account_settings_pk', ['business_id', 'mode'])
    .execute();
}
