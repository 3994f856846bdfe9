import { type Kysely, type Migration, sql } from 'kysely';

/** Migration 0006_idempotency_keys, as it shipped: never edit it, add the next. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('idempotency_keys')
      .addColumn('business_id', 'text', (c) => c.notNull())
      .addColumn('mode', 'text', (c) => c.notNull())
      .addColumn('key', 'text', (c) => c.notNull())
      .addColumn('request_hash', 'text', (c) => c.notNull())
      .addColumn('response_status', 'integer')
      .addColumn('response_body', 'text')
      .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
      .addPrimaryKeyConstraint('idempotency_keys_pk', ['business_id', 'mode', 'key'])
      .execute();
  },
};
