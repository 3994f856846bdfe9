import { randomUUID } from 'node:crypto';
import { encodeSignedEvent } from '@payhook/core';
import type { CompiledQuery, Kysely, OperationNodeSource, Transaction } from 'kysely';
import type { Mode, Schema } from '../db/schema.js';
import { endpointTakesSql } from '../endpoints/filter.js';
import { writeEventStatement } from './delivery-state.js';

type Executor = Transaction<Schema> | Kysely<Schema>;

/**
 * The bytes every attempt of an event sends: `{"event","data","checksum"}`, with `data` in RFC 8785
 * order (so a payhook receiver verifies it on its fast path) and the checksum keyed by the
 * receiving business's id (docs/service-interface.md, "The wire format").
 *
 * @example
 * ```ts
 * const body = signedPayload('payment.session.created', payment, 'biz_123');
 * ```
 */
export function signedPayload(type: string, data: unknown, businessId: string): string {
  return encodeSignedEvent(type, data, businessId);
}

/**
 * The enabled endpoints of a business in a mode that take events of `type`, oldest first: where
 * a redelivery of such an event goes.
 */
export async function endpointsTaking(
  tx: Executor,
  businessId: string,
  mode: Mode,
  type: string,
): Promise<{ id: string; url: string }[]> {
  return tx
    .selectFrom('webhook_endpoints as ep')
    .select(['ep.id', 'ep.url'])
    .where('ep.business_id', '=', businessId)
    .where('ep.mode', '=', mode)
    .where('ep.status', '=', 'enabled')
    .where(endpointTakesSql('ep', type))
    .orderBy('ep.created_at')
    .orderBy('ep.id')
    .execute();
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
 * (its payload signed here, once), one delivery per enabled endpoint of that business and mode
 * that takes the event's type (read by the statement itself, oldest endpoint first), and the wake mark that wakes the workers after the commit, only
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
  const statement = writeEventStatement(
    executor,
    {
      id,
      businessId: event.businessId,
      mode: event.mode,
      type: event.type,
      paymentId: event.payment.id,
      payload: signedPayload(event.type, event.payment, event.businessId),
    },
    writes,
  );
  return { id, statement };
}

/**
 * Writes an event of the outbox in the caller's transaction: its payload signed once (every
 * attempt sends exactly those bytes, so the checksum never changes between retries), and one
 * delivery per webhook URL registered for that business and mode, with the wake mark (one round
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
