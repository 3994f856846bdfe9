import { randomUUID } from 'node:crypto';
import { type Kysely, sql, type Transaction } from 'kysely';
import type { Schema } from '../../db/schema.js';
import { isWebhookUrl } from '../destination.js';
import { WAKE } from './wake-channel.js';

/**
 * Queues deliveries (an event to a URL each, and the endpoint it is made for, if any), in the
 * caller's transaction, clears the `no_webhook` mark of their events, and wakes the workers when
 * that transaction commits (the statement returns the wake mark, `db/wake.ts`: a rolled-back write
 * wakes no one). Returns the new deliveries' ids, in the order given. One statement.
 *
 * @example
 * ```ts
 * const [id] = await enqueueDeliveries(tx, [{ eventId, url: 'https://merchant.example/hooks' }]);
 * ```
 */
export async function enqueueDeliveries(
  tx: Transaction<Schema> | Kysely<Schema>,
  deliveries: readonly { eventId: string; url: string; endpointId?: string | null }[],
): Promise<string[]> {
  if (deliveries.length === 0) return [];
  const ids = deliveries.map(() => randomUUID());
  const insert = tx
    .insertInto('deliveries')
    .values(
      deliveries.map((d, i) => ({
        id: ids[i] as string,
        event_id: d.eventId,
        url: d.url,
        endpoint_id: d.endpointId ?? null,
      })),
    )
    .returning(['event_id', 'url']);
  // An event that had no delivery to a webhook URL has one now (`delivery_status=none` no more).
  await sql`with d as (${insert}),
    e as (update events set no_webhook = false
      where no_webhook and id in (select event_id from d where ${isWebhookUrl('d.url')}))
    select ${WAKE}`.execute(tx);
  return ids;
}
