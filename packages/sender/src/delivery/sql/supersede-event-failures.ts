import { type Kysely, sql, type Transaction } from 'kysely';
import type { Schema } from '../../db/schema.js';

/**
 * Marks this event's failed deliveries to `urls` as replaced by the new deliveries `ids` (one per
 * URL, in the same order): a bulk redelivery leaves them be.
 *
 * @example
 * ```ts
 * await supersedeEventFailures(tx, eventId, urls, await enqueueDeliveries(tx, deliveries));
 * ```
 */
export async function supersedeEventFailures(
  tx: Transaction<Schema> | Kysely<Schema>,
  eventId: string,
  urls: readonly string[],
  ids: readonly string[],
): Promise<void> {
  await sql`
          update deliveries d set superseded_by = m.new_id
          from unnest(${urls}::text[], ${ids}::uuid[]) as m(url, new_id)
          where d.event_id = ${eventId} and d.url = m.url and d.status = 'failed' and d.superseded_by is null`.execute(
    tx,
  );
}
