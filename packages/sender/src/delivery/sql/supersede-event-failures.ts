import { type Kysely, sql, type Transaction } from 'kysely';
import type { Schema } from '../../db/schema.js';
import { supersedePairs } from './supersede-deliveries.js';

/**
 * Marks this event's failed deliveries to `urls` as replaced by the new deliveries `ids` (one per
 * URL, in the same order): a bulk redelivery leaves them be.
 *
 * @example
 * ```ts
 * await supersedeEventFailures(tx, eventId, urls, await enqueueDeliveries(tx, deliveries));
 * ```
 */
export function supersedeEventFailures(
  tx: Transaction<Schema> | Kysely<Schema>,
  eventId: string,
  urls: readonly string[],
  ids: readonly string[],
): Promise<void> {
  return supersedePairs(
    tx,
    urls,
    'text',
    ids,
    sql`d.event_id = ${eventId} and d.url = m.key and d.status = 'failed' and d.superseded_by is null`,
  );
}
