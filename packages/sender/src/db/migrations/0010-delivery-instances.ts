import type { Kysely } from 'kysely';

/** Migration 0010_delivery_instances, shipped: what it makes must never change; add the next. */
export async function up(db: Kysely<unknown>): Promise<void> {
  // The running delivery workers, each renewing its row: their number and order decide which
  // URLs each one sends to (docs/decisions.md, "The per-URL limit across instances").
  await db.schema
    .createTable('delivery_instances')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('seen_at', 'timestamptz', (c) => c.notNull())
    .execute();
}
