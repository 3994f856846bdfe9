import { randomUUID } from 'node:crypto';
import { canonicalJson, computeChecksum } from '@payhook/core';
import { type CompiledQuery, type Kysely, type OperationNodeSource, sql, type Transaction } from 'kysely';
import { PREPARE } from '../db/database.js';
import type { Mode, Schema } from '../db/schema.js';

/** The channel on which a committed outbox write wakes the delivery workers (every instance). */
export const WAKE_CHANNEL = 'payhook_deliveries';

type Executor = Transaction<Schema> | Kysely<Schema>;

/**
 * The bytes every attempt of an event sends: `{"event","data","checksum"}`, with `data` in RFC 8785
 * order (so a payhook receiver verifies it on its fast path) and the checksum of DESIGN.md keyed
 * by the receiving business's id.
 *
 * @example
 * ```ts
 * const body = signedPayload('payment.session.created', payment, 'biz_123');
 * ```
 */
export function signedPayload(type: string, data: unknown, businessId: string): string {
  const checksum = computeChecksum(type, data, businessId);
  return `{"event":${JSON.stringify(type)},"data":${canonicalJson(data)},"checksum":"${checksum}"}`;
}

/**
 * Queues deliveries (an event to a URL each), in the caller's transaction, and wakes the workers
 * when that transaction commits (NOTIFY is transactional: a rolled-back write wakes no one).
 * Returns the new deliveries' ids, in the order given. One statement: the rows and the NOTIFY.
 */
export async function enqueueDeliveries(
  tx: Executor,
  deliveries: readonly { eventId: string; url: string }[],
): Promise<string[]> {
  if (deliveries.length === 0) return [];
  const ids = deliveries.map(() => randomUUID());
  const insert = tx
    .insertInto('deliveries')
    .values(deliveries.map((d, i) => ({ id: ids[i] as string, event_id: d.eventId, url: d.url })));
  await sql`with d as (${insert}) select pg_notify(${WAKE_CHANNEL}, '')`.execute(tx);
  return ids;
}

/** The webhook URLs a business has registered in a mode. */
export async function registeredUrls(tx: Executor, businessId: string, mode: Mode): Promise<string[]> {
  const settings = await tx
    .selectFrom('account_settings')
    .select('webhook_urls')
    .where('business_id', '=', businessId)
    .where('mode', '=', mode)
    .executeTakeFirst();
  return settings?.webhook_urls ?? [];
}

/** An event of the outbox to write: its type, whose it is, and the payment it carries (signed). */
export interface OutboxEvent {
  type: string;
  businessId: string;
  mode: Mode;
  payment: { id: string };
}

/**
 * The outbox write of an event as ONE statement, compiled for `executor.executeQuery`: the event
 * (its payload signed here, once), one delivery per webhook URL registered for that business and
 * mode (read by the statement itself, in URL order), and the NOTIFY that wakes the workers, only
 * when it wrote deliveries. `writes`, the caller's own data-modifying statements (inserts,
 * updates; no `returning` needed), run as CTEs of the same statement: a single statement is
 * atomic by itself, so the state change and its outbox rows commit together (or, inside a
 * transaction, with it) without a transaction of their own. Foreign keys, such as the event's to
 * a payment inserted in `writes`, are checked at the end of the statement. On PostgreSQL it runs
 * as a prepared statement (`PREPARE`): its text depends only on the shapes of `writes`.
 *
 * @example
 * ```ts
 * const { id, statement } = eventWrite(db, { type, businessId, mode, payment }, [
 *   db.insertInto('payments').values(row),
 * ]);
 * await db.executeQuery(statement);
 * ```
 */
export function eventWrite(
  executor: Executor,
  event: OutboxEvent,
  writes: readonly OperationNodeSource[] = [],
): { id: string; statement: CompiledQuery<unknown> } {
  const id = randomUUID();
  const insertEvent = executor.insertInto('events').values({
    id,
    business_id: event.businessId,
    mode: event.mode,
    type: event.type,
    payment_id: event.payment.id,
    payload: signedPayload(event.type, event.payment, event.businessId),
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
  return { id, statement: statement.compile(executor) };
}

/**
 * Writes an event of the outbox in the caller's transaction: its payload signed once (every
 * attempt sends exactly those bytes, so the checksum never changes between retries), and one
 * delivery per webhook URL registered for that business and mode, with the NOTIFY (one round
 * trip: see `eventWrite`). Returns the event's id.
 *
 * @example
 * ```ts
 * await db.transaction().execute(async (tx) => {
 *   await tx.updateTable('payments').set({ status: 'failed' }).where('id', '=', id).execute();
 *   await writeEvent(tx, { type: 'payment.session.failed', businessId, mode, payment });
 * });
 * ```
 */
export async function writeEvent(tx: Executor, event: OutboxEvent): Promise<string> {
  const { id, statement } = eventWrite(tx, event);
  await tx.executeQuery(statement);
  return id;
}
