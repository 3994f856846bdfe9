import type { Kysely, Transaction } from 'kysely';
import type { Mode, Schema } from '../../db/schema.js';
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
 * Locks the failed deliveries not yet redelivered of a business's events created in a window,
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
): Promise<{ id: string; event_id: string; url: string }[]> {
  return (
    tx
      .selectFrom('deliveries as d')
      .innerJoin('events as e', 'e.id', 'd.event_id')
      .select(['d.id', 'd.event_id', 'd.url'])
      .where('e.business_id', '=', businessId)
      .where('e.mode', '=', mode)
      .where('e.created_at', '>=', since)
      .where('e.created_at', '<', until)
      .where('d.status', '=', 'failed')
      .where('d.superseded_by', 'is', null)
      // A listener's deliveries (`cli:<id>`) are not sent by the worker: never redelivered.
      .where(isWebhookUrl('d.url'))
      .forUpdate('d')
      .skipLocked()
      .execute()
  );
}
