import { type Kysely, sql } from 'kysely';
import { uuidKey } from './columns.js';

/** Migration 0007_delivery, shipped: what it makes must never change; add the next. */
export async function up(db: Kysely<unknown>): Promise<void> {
  // The delivery worker's state. A claim moves `next_attempt_at` to the end of its lease, so
  // the due index alone finds work and a killed worker's claims come back when it passes;
  // `claim_token` lets only the current holder record the attempt.
  await db.schema
    .alterTable('deliveries')
    .addColumn('claim_token', 'uuid')
    .addColumn('first_attempt_at', 'timestamptz')
    .addColumn('last_attempt_at', 'timestamptz')
    .addColumn('finished_at', 'timestamptz')
    .addColumn('last_status_code', 'integer')
    .addColumn('last_error', 'text')
    // A failed delivery that a redelivery replaced: bulk redelivery skips it.
    .addColumn('superseded_by', 'uuid')
    .execute();
  await db.schema.createIndex('deliveries_event').on('deliveries').column('event_id').execute();
  await db.schema
    .createIndex('deliveries_failed')
    .on('deliveries')
    .column('event_id')
    .where(sql.ref('status'), '=', 'failed')
    .execute();
  await db.schema
    .createTable('delivery_attempts')
    .$call(uuidKey)
    .addColumn('delivery_id', 'uuid', (c) => c.notNull().references('deliveries.id'))
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('started_at', 'timestamptz', (c) => c.notNull())
    .addColumn('latency_ms', 'integer', (c) => c.notNull())
    .addColumn('status_code', 'integer')
    .addColumn('response_body', 'text')
    .addColumn('error_code', 'text')
    .addColumn('error_message', 'text')
    .addUniqueConstraint('delivery_attempts_number', ['delivery_id', 'attempt'])
    .execute();
  await db.schema.createIndex('events_type').on('events').columns(['business_id', 'mode', 'type']).execute();
}
