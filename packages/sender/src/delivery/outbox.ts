import { randomUUID } from 'node:crypto';
import { canonicalJson, computeChecksum } from '@payhook/core';
import { type Kysely, sql, type Transaction } from 'kysely';
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
 * Returns the new deliveries' ids, in the order given.
 */
export async function enqueueDeliveries(
  tx: Executor,
  deliveries: readonly { eventId: string; url: string }[],
): Promise<string[]> {
  if (deliveries.length === 0) return [];
  const ids = deliveries.map(() => randomUUID());
  await tx
    .insertInto('deliveries')
    .values(deliveries.map((d, i) => ({ id: ids[i], event_id: d.eventId, url: d.url })))
    .execute();
  await sql`select pg_notify(${WAKE_CHANNEL}, '')`.execute(tx);
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

/**
 * Writes an event of the outbox in the caller's transaction: its payload signed once (every
 * attempt sends exactly those bytes, so the checksum never changes between retries), and one
 * delivery per webhook URL registered for that business and mode. Returns the event's id.
 *
 * @example
 * ```ts
 * await db.transaction().execute(async (tx) => {
 *   await tx.updateTable('payments').set({ status: 'failed' }).where('id', '=', id).execute();
 *   await writeEvent(tx, { type: 'payment.session.failed', businessId, mode, payment });
 * });
 * ```
 */
export async function writeEvent(
  tx: Executor,
  event: { type: string; businessId: string; mode: Mode; payment: { id: string } },
): Promise<string> {
  const id = randomUUID();
  await tx
    .insertInto('events')
    .values({
      id,
      business_id: event.businessId,
      mode: event.mode,
      type: event.type,
      payment_id: event.payment.id,
      payload: signedPayload(event.type, event.payment, event.businessId),
    })
    .execute();
  const urls = await registeredUrls(tx, event.businessId, event.mode);
  await enqueueDeliveries(
    tx,
    urls.map((url) => ({ eventId: id, url })),
  );
  return id;
}
