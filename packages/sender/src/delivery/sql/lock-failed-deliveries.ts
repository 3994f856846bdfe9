import { type Kysely, sql, type Transaction } from 'kysely';
import type { Mode, Schema } from '../../db/schema.js';
import { endpointTakesSql } from '../../endpoints/filter.js';
import { isWebhookUrl } from '../destination.js';

/** Which failed deliveries {@link lockFailedDeliveries} takes. */
export interface FailedSince {
  businessId: string;
  mode: Mode;
  /** Events created at or after this time. */
  since: Date;
  /** Events created before this time. */
  until: Date;
}

/**
 * Locks the failed deliveries not yet redelivered of a business's events created in a window
 * (only those whose endpoint, if they have one, still takes the event),
 * skipping rows another transaction holds: of two bulk redeliveries at once, each failure is taken
 * by one of them.
 *
 * @example
 * ```ts
 * const failed = await lockFailedDeliveries(tx, { businessId, mode, since, until: new Date() });
 * ```
 */
export function lockFailedDeliveries(
  tx: Transaction<Schema> | Kysely<Schema>,
  { businessId, mode, since, until }: FailedSince,
): Promise<{ id: string; event_id: string; url: string; endpoint_id: string | null }[]> {
  return (
    tx
      .selectFrom('deliveries as d')
      .innerJoin('events as e', 'e.id', 'd.event_id')
      .leftJoin('webhook_endpoints as ep', 'ep.id', 'd.endpoint_id')
      .select(['d.id', 'd.event_id', 'd.url', 'd.endpoint_id'])
      .where('e.business_id', '=', businessId)
      .where('e.mode', '=', mode)
      .where('e.created_at', '>=', since)
      .where('e.created_at', '<', until)
      .where('d.status', '=', 'failed')
      .where('d.superseded_by', 'is', null)
      // A listener's deliveries (`cli:<id>`) are not sent by the worker: never redelivered.
      .where(isWebhookUrl('d.url'))
      // A delivery made for an endpoint goes again only while that endpoint takes the event: it
      // exists, is enabled, and its filter names the type (deliveries older than endpoints have
      // none, and go again as before).
      .where((eb) =>
        eb.or([
          eb('d.endpoint_id', 'is', null),
          eb.and([eb('ep.status', '=', 'enabled'), endpointTakesSql('ep', sql.ref('e.type'))]),
        ]),
      )
      .forUpdate('d')
      .skipLocked()
      .execute()
  );
}
