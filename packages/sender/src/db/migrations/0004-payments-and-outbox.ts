import { type Kysely, type Migration, sql } from 'kysely';

/** Migration 0004_payments_and_outbox, as it shipped: never edit it, add the next. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('payments')
      .addColumn('id', 'uuid', (c) => c.primaryKey())
      .addColumn('business_id', 'text', (c) => c.notNull())
      .addColumn('mode', 'text', (c) => c.notNull().check(sql`mode in ('test', 'live')`))
      .addColumn('reference', 'text', (c) => c.notNull())
      .addColumn('status', 'text', (c) =>
        c.notNull().check(sql`status in ('pending', 'captured', 'settled', 'failed')`),
      )
      .addColumn('method_type', 'text')
      // The payment object as the API returns it, kept whole so that responses and events agree.
      .addColumn('data', 'jsonb', (c) => c.notNull())
      .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
      .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
      .addUniqueConstraint('payments_reference', ['business_id', 'mode', 'reference'])
      .execute();
    await db.schema
      .createIndex('payments_page')
      .on('payments')
      .columns(['business_id', 'mode', 'created_at desc', 'id desc'])
      .execute();
    // The transactional outbox: an event and one delivery per registered URL, written in the
    // transaction of the state change; the delivery worker only reads them.
    await db.schema
      .createTable('events')
      .addColumn('id', 'uuid', (c) => c.primaryKey())
      .addColumn('business_id', 'text', (c) => c.notNull())
      .addColumn('mode', 'text', (c) => c.notNull())
      .addColumn('type', 'text', (c) => c.notNull())
      .addColumn('payment_id', 'uuid', (c) => c.references('payments.id'))
      // The exact bytes every attempt sends: {"event","data","checksum"}, signed once.
      .addColumn('payload', 'text', (c) => c.notNull())
      .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
      .execute();
    await db.schema
      .createIndex('events_page')
      .on('events')
      .columns(['business_id', 'mode', 'created_at desc', 'id desc'])
      .execute();
    await db.schema
      .createTable('deliveries')
      .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
      .addColumn('event_id', 'uuid', (c) => c.notNull().references('events.id'))
      .addColumn('url', 'text', (c) => c.notNull())
      .addColumn('status', 'text', (c) =>
        c.notNull().defaultTo('pending').check(sql`status in ('pending', 'delivered', 'failed')`),
      )
      .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('next_attempt_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
      .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
      .execute();
    await db.schema
      .createIndex('deliveries_due')
      .on('deliveries')
      .columns(['next_attempt_at'])
      .where(sql.ref('status'), '=', 'pending')
      .execute();
  },
};
