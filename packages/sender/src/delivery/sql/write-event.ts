import { type CompiledQuery, type Kysely, type OperationNodeSource, sql, type Transaction } from 'kysely';
import { PREPARE } from '../../db/database.js';
import type { Mode, Schema } from '../../db/schema.js';
import { WAKE_CHANNEL } from './wake-channel.js';

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
 * updates) as CTEs, the event, one delivery per webhook URL registered for its business and mode
 * (read by the statement itself, in URL order), and the NOTIFY that wakes the workers, only when
 * it wrote deliveries. Prepared on PostgreSQL: its text depends only on the shapes of `writes`.
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
  });
  const ctes = writes.map((write, i) => sql`${sql.raw(`w${i}`)} as (${write}), `);
  const statement = sql`${sql.raw(PREPARE)}with ${sql.join(ctes, sql``)}e as (${insertEvent}),
    d as (
      insert into deliveries (event_id, url)
      select ${id}::uuid, jsonb_array_elements_text(webhook_urls)
      from account_settings
      where business_id = ${event.businessId} and mode = ${event.mode}
      returning 1
    )
    select pg_notify(${WAKE_CHANNEL}, '') where exists (select from d)`;
  return statement.compile(executor);
}
