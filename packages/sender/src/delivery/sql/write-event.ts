import { type CompiledQuery, type Kysely, type OperationNodeSource, sql, type Transaction } from 'kysely';
import { PREPARE } from '../../db/database.js';
import type { Mode, Schema } from '../../db/schema.js';
import { endpointTakesSql } from '../../endpoints/filter.js';
import { WAKE } from './wake-channel.js';

/** An event row to write, its payload already signed. */
export interface EventRow {
  id: string;
  businessId: string;
  mode: Mode;
  type: string;
  paymentId: string;
  /** The exact bytes every attempt sends. */
  payload: string;
}

/**
 * The outbox write of an event as ONE statement, compiled: `writes` (the caller's own inserts and
 * updates) as CTEs, the event, one delivery per enabled webhook endpoint of its business and mode
 * whose `enabled_events` take the event's type (read once by the statement itself, oldest endpoint
 * first: the fan-out happens here, once, so a filter change applies to events made after it and
 * the claim never looks at a filter), the event marked `no_webhook` when none does, and the wake
 * mark (`db/wake.ts`) that wakes the workers once it commits, only when it wrote deliveries.
 * Prepared on PostgreSQL: its text depends only on the shapes of `writes`.
 *
 * @example
 * ```ts
 * await db.executeQuery(writeEventStatement(db, row, [db.insertInto('payments').values(payment)]));
 * ```
 */
export function writeEventStatement(
  executor: Transaction<Schema> | Kysely<Schema>,
  event: EventRow,
  writes: readonly OperationNodeSource[] = [],
): CompiledQuery<unknown> {
  const { id } = event;
  const insertEvent = executor.insertInto('events').values({
    id,
    business_id: event.businessId,
    mode: event.mode,
    type: event.type,
    payment_id: event.paymentId,
    payload: event.payload,
    // No endpoint takes it: what `delivery_status=none` reads.
    no_webhook: sql<boolean>`not exists (select from ep)`,
  });
  const ctes = writes.map((write, i) => sql`${sql.raw(`w${i}`)} as (${write}), `);
  // The endpoints that take the event, read once: each gets a delivery.
  const statement = sql`${sql.raw(PREPARE)}with ${sql.join(ctes, sql``)}ep as materialized (
      select ep.id, ep.url, ep.created_at from webhook_endpoints ep
      where ep.business_id = ${event.businessId} and ep.mode = ${event.mode}
        and ep.status = 'enabled' and ${endpointTakesSql('ep', event.type)}
    ),
    e as (${insertEvent}),
    d as (
      insert into deliveries (event_id, url, endpoint_id)
      select ${id}::uuid, ep.url, ep.id from ep
      order by ep.created_at, ep.id
      returning 1
    )
    select ${WAKE} where exists (select from d)`;
  return statement.compile(executor);
}
