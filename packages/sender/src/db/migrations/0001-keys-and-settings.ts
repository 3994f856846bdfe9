import { type Kysely, type Migration, sql } from 'kysely';

/** Migration 0001_keys_and_settings, as it shipped: never edit it, add the next. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('api_keys')
      .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
      .addColumn('business_id', 'text', (c) => c.notNull())
      .addColumn('mode', 'text', (c) => c.notNull().check(sql`mode in ('test', 'live')`))
      .addColumn('key_hash', 'text', (c) => c.notNull().unique())
      .addColumn('key_prefix', 'text', (c) => c.notNull())
      .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
      .execute();
    await db.schema
      .createTable('account_settings')
      .addColumn('business_id', 'text', (c) => c.notNull())
      .addColumn('mode', 'text', (c) => c.notNull().check(sql`mode in ('test', 'live')`))
      .addColumn('require_mfa', 'boolean', (c) => c.notNull().defaultTo(false))
      .addColumn('webhook_urls', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
      .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
      .addPrimaryKeyConstraint('account_settings_pk', ['business_id', 'mode'])
      .execute();
  },
};
