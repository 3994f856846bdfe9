import { type Kysely, type Migration, sql } from 'kysely';

/** Migration 0002_customers, as it shipped: never edit it, add the next. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('customers')
      .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
      .addColumn('business_id', 'text', (c) => c.notNull())
      .addColumn('mode', 'text', (c) => c.notNull().check(sql`mode in ('test', 'live')`))
      .addColumn('first_name', 'text', (c) => c.notNull())
      .addColumn('last_name', 'text', (c) => c.notNull())
      .addColumn('email', 'text', (c) => c.notNull())
      .addColumn('phone_number', 'text', (c) => c.notNull())
      .addColumn('billing_address', 'jsonb', (c) => c.notNull())
      .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
      .execute();
    // Keyset pagination, newest first, within one business and mode.
    await db.schema
      .createIndex('customers_page')
      .on('customers')
      .columns(['business_id', 'mode', 'created_at desc', 'id desc'])
      .execute();
  },
};
