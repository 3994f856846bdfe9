import { type Kysely, type Migration, sql } from 'kysely';

/** Migration 0009_signing_secrets, as it shipped: never edit it, add the next. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // Standard Webhooks secrets: one current per business and mode (expires_at null), and the
    // previous ones until the end of their rotation's overlap.
    await db.schema
      .createTable('signing_secrets')
      .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
      .addColumn('business_id', 'text', (c) => c.notNull())
      .addColumn('mode', 'text', (c) => c.notNull().check(sql`mode in ('test', 'live')`))
      .addColumn('secret', 'text', (c) => c.notNull())
      .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
      .addColumn('expires_at', 'timestamptz')
      .execute();
    await sql`create unique index signing_secrets_current on signing_secrets (business_id, mode) where expires_at is null`.execute(
      db,
    );
    await db.schema
      .createIndex('signing_secrets_by_business')
      .on('signing_secrets')
      .columns(['business_id', 'mode', 'created_at desc'])
      .execute();
  },
};
