import { type Kysely, type Migration, sql } from 'kysely';

/** Migration 0003_beneficiaries, as it shipped: never edit it, add the next. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('beneficiaries')
      .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
      .addColumn('business_id', 'text', (c) => c.notNull())
      .addColumn('mode', 'text', (c) => c.notNull().check(sql`mode in ('test', 'live')`))
      .addColumn('currency', 'text', (c) => c.notNull())
      // The beneficiary as the API returns it (every field of the spec's table), written once.
      .addColumn('data', 'jsonb', (c) => c.notNull())
      .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
      .execute();
    await db.schema
      .createIndex('beneficiaries_page')
      .on('beneficiaries')
      .columns(['business_id', 'mode', 'created_at desc', 'id desc'])
      .execute();
  },
};
