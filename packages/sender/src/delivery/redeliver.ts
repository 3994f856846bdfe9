import type { Transaction } from 'kysely';
import type { Schema } from '../db/schema.js';
import {
  enqueueDeliveries,
  type FailedSince,
  lockFailedDeliveries,
  supersedeDeliveries,
  supersedeEventFailures,
} from './delivery-state.js';

/**
 * A manual redelivery of one event: a new delivery, with its own 48 hours, to each of
 * `endpoints`, in the caller's transaction; this event's failures at those URLs are marked as
 * replaced. Returns the new deliveries' ids, in the order of `endpoints`.
 *
 * @example
 * ```ts
 * const ids = await redeliverEvent(tx, event.id, await endpointsTaking(tx, businessId, mode, event.type));
 * ```
 */
export async function redeliverEvent(
  tx: Transaction<Schema>,
  eventId: string,
  endpoints: readonly { id: string | null; url: string }[],
): Promise<string[]> {
  const ids = await enqueueDeliveries(
    tx,
    endpoints.map(({ id, url }) => ({ eventId, url, endpointId: id })),
  );
  await supersedeEventFailures(
    tx,
    eventId,
    endpoints.map((e) => e.url),
    ids,
  );
  return ids;
}

/**
 * A bulk redelivery: every failed delivery of the events in a window that was not redelivered
 * yet, and whose endpoint still takes its event (enabled, the filter naming its type), is made
 * again, once (a redelivered failure is not picked again), in the caller's
 * transaction. Returns how many it made.
 *
 * @example
 * ```ts
 * const redelivered = await redeliverFailed(tx, { businessId, mode, since, until: new Date() });
 * ```
 */
export async function redeliverFailed(tx: Transaction<Schema>, window: FailedSince): Promise<number> {
  const failed = await lockFailedDeliveries(tx, window);
  const ids = await enqueueDeliveries(
    tx,
    failed.map((d) => ({ eventId: d.event_id, url: d.url, endpointId: d.endpoint_id })),
  );
  if (failed.length > 0) {
    await supersedeDeliveries(
      tx,
      failed.map((f) => f.id),
      ids,
    );
  }
  return failed.length;
}
