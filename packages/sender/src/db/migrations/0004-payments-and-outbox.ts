import { type Kysely, sql } from 'kysely';
import {
  businessAndMode,
  businessAndUncheckedMode,
  createdAt,
  createPageIndex,
  stampedNow,
  uuidKey,
} from './columns.js';

/** Migration 0004_payments_and_outbox, shipped: what it makes must never change; add the next. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('payments')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .$call(businessAndMode)
    .addColumn('reference', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) =>
      c.notNull().check(sql`status in ('pending', 'captured', 'settled', 'failed')`),
    )
    .addColumn('method_type', 'text')
    // The payment object as the API returns it, kept whole so that responses and events agree.
    .addColumn('data', 'jsonb', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .$call(createdAt)
    .addUniqueConstraint('payments_reference', ['business_id', 'mode', 'reference'])
    .execute();
  await createPageIndex(db, 'payments');
  // The transactional outbox: an event and one delivery per registered URL, written in the
  // transaction of the state change; the delivery worker only reads them.
  await db.schema
    .createTable('events')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .$call(businessAndUncheckedMode)
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('payment_id', 'uuid', (c) => c.references('payments.id'))
    // The exact bytes every attempt sends: {"event","data","checksum"}, signed once.
    .addColumn('payload', 'text', (c) => c.notNull())
    .$call(createdAt)
    .execute();
  await createPageIndex(db, 'events');
  await db.schema
    .createTable('deliveries')
    .$call(uuidKey)
    .addColumn('event_id', 'uuid', (c) => c.notNull().references('events.id'))
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) =>
      c.notNull().defaultTo('pending').check(sql`status in ('pending', 'delivered', 'failed')`),
    )
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_attempt_at', 'timestamptz', stampedNow)
    .$call(createdAt)
    .execute();
  await db.schema
    .createIndex('deliveries_due')
    .on('deliveries')
    .columns(['next_attempt_at'])
    .where(sql.ref('status'), '=', 'pending')
    .execute();
}
