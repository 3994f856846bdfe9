import { type Kysely, sql } from 'kysely';
import { createBusinessTable, createdAt } from './columns.js';

/** Migration 0009_signing_secrets, shipped: what it makes must never change; add the next. */
export async function up(db: Kysely<unknown>): Promise<void> {
  // Standard Webhooks secrets: one current per business and mode (expires_at null), and the
  // previous ones until the end of their rotation's overlap.
  await createBusinessTable(db, 'signing_secrets')
    .addColumn('secret', 'text', (c) => c.notNull())
    .$call(createdAt)
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
}
