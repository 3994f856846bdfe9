// An event's delivery status, read from its deliveries: the `delivery_status` of `GET /events`, and
// what the list's filter by status reads first.
import { type RawBuilder, type SqlBool, sql } from 'kysely';
import type { Mode } from '../../db/schema.js';
import { isWebhookUrl } from '../destination.js';

/** The delivery statuses of an event, in the API's words. */
export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed', 'none'] as const;
/** One of {@link DELIVERY_STATUSES}. */
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/**
 * An event's delivery status (`events` in scope), from its deliveries. A listener's deliveries
 * (`cli:<id>`, what a developer's machine did) are shown with the others but never make an event
 * failed or delivered. One aggregate over the event's deliveries, looked up by event: three EXISTS
 * became hashed subplans, each a scan of every delivery (163 ms a page with 6,000,000 of them).
 *
 * @example
 * ```ts
 * db.selectFrom('events').select(deliveryStatus.as('delivery_status'));
 * ```
 */
export const deliveryStatus = sql<DeliveryStatus>`(select case
    when bool_or(d.status = 'pending') then 'pending'
    when bool_or(d.status = 'failed' and d.superseded_by is null and ${isWebhookUrl('d.url')}) then 'failed'
    when bool_or(${isWebhookUrl('d.url')}) then 'delivered'
    else 'none' end
  from deliveries d where d.event_id = events.id)`;

/**
 * What every event of business `businessId` and `mode` with a rare `status` has, that a partial
 * index holds, so that PostgreSQL reads those events rather than walk the business's events until
 * a page fills (the caller still checks each one's exact status with {@link deliveryStatus}):
 * - `failed` and `none`: the event's marks (`failed_delivery`, `no_webhook`, kept by the statements
 *   that write deliveries), read through the partial indexes of the marked events in the list's
 *   order: a page reads its own events. Failures are old (a failure takes the 48 hours of
 *   retries): walking the business's events newest first took 2.7 s a page with 2,000,000 of
 *   them, and reading every business's failed deliveries 1.15 s; `none` walked all of them, past
 *   the statement timeout (503).
 * - `pending`: the events of the business's pending deliveries, read once as an array
 *   (`= any(array(...))`) through `deliveries_endpoint_pending`: those of each of its endpoints,
 *   and the few that no endpoint owns (redeliveries of failures older than the endpoints' ids,
 *   every business's). So another business's backlog (its URL down for hours) is never read; the
 *   business's own backlog is, once per page. A mark would cost a write of the event for each
 *   delivery made and delivered.
 * `delivered` fills a page at once: undefined.
 *
 * @example
 * ```ts
 * const candidates = hasDeliveryFor('pending', businessId, mode);
 * if (candidates) list = list.where(candidates);
 * ```
 */
export function hasDeliveryFor(
  status: DeliveryStatus,
  businessId: string,
  mode: Mode,
): RawBuilder<SqlBool> | undefined {
  switch (status) {
    case 'failed':
      return sql`events.failed_delivery`;
    case 'none':
      return sql`events.no_webhook`;
    case 'pending':
      // Each endpoint's own pending deliveries, read by a sub-select per endpoint: as a join, the
      // planner could read every business's pending deliveries and keep this one's.
      return sql`events.id = any(array(
        select unnest(array(select d.event_id from deliveries d
          where d.endpoint_id = ep.id and d.status = 'pending'))
        from webhook_endpoints ep where ep.business_id = ${businessId} and ep.mode = ${mode}
        union all
        select d.event_id from deliveries d where d.status = 'pending' and d.endpoint_id is null))`;
    default:
      return undefined;
  }
}
