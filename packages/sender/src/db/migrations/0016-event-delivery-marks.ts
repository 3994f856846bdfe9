import type { Kysely } from 'kysely';

/** Migration 0016_event_delivery_marks, shipped: what it makes must never change; add the next. */
export async function up(db: Kysely<unknown>): Promise<void> {
  // Two marks on each event, for the events list by a rare delivery status, each read through a
  // partial index (docs/decisions.md, "An event's rare delivery statuses are marked on it"):
  // - `no_webhook`: no delivery to a webhook URL (`delivery_status=none`). Set when the event is
  //   written and no endpoint takes it; cleared when a delivery to a webhook URL is added (a
  //   redelivery, a recovery).
  // - `failed_delivery`: a delivery to a webhook URL failed for good and was not sent again
  //   (what `delivery_status=failed` looks for). Set when a delivery fails for good; cleared when
  //   the event's last such failure is superseded by a redelivery.
  // Columns with a constant default are added without rewriting the table. The events written
  // before them are marked by the online step that builds each index (`fill` in
  // online-indexes.ts), outside this transaction, which would otherwise stop every write to the
  // events while it read a provider's history.
  await db.schema
    .alterTable('events')
    .addColumn('no_webhook', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('failed_delivery', 'boolean', (c) => c.notNull().defaultTo(false))
    .execute();
}
