import { sql, type Transaction } from 'kysely';
import type { Schema } from '../../db/schema.js';

/**
 * The deleted-endpoint exit: the pending deliveries of endpoints deleted in the caller's
 * transaction end, failed with `last_error = 'endpoint_deleted'` (nothing could sign them, their
 * secrets went with the endpoint), claimed or not: a claim's record then finds its token gone and
 * changes nothing. Their events are marked `failed_delivery`. Their hourly counts go too: no page
 * shows them any more. Called by the endpoints' lifecycle (`endpoints/lifecycle.ts`) for an
 * endpoint deleted through the API, and for those with their own secrets that the settings'
 * webhook_urls leave out.
 *
 * @example
 * ```ts
 * await db.transaction().execute((tx) => endDeletedEndpoints(tx, [endpoint.id]));
 * ```
 */
export async function endDeletedEndpoints(
  tx: Transaction<Schema>,
  endpointIds: readonly string[],
): Promise<void> {
  if (endpointIds.length === 0) return;
  const ended = tx
    .updateTable('deliveries')
    .set({
      status: 'failed',
      finished_at: sql<Date>`clock_timestamp()`,
      claim_token: null,
      last_error: 'endpoint_deleted',
    })
    .where('endpoint_id', 'in', endpointIds)
    .where('status', '=', 'pending')
    .returning('event_id');
  // Their events have a failure now (see recordAttemptsStatement's `failed`).
  await sql`with d as (${ended})
    update events set failed_delivery = true where id = any(array(select event_id from d))`.execute(tx);
  await tx.deleteFrom('endpoint_attempt_hours').where('endpoint_id', 'in', endpointIds).execute();
}
