import type { Kysely } from 'kysely';
import type { BusinessScope, Schema } from '../db/schema.js';
import { insertListenerDeliveries } from '../delivery/delivery-state.js';
import { cliDestination } from '../delivery/destination.js';

/** What a listener did with one event it was sent: where it forwarded it and what came back. */
export interface ListenerAttempt {
  /** The id the stream gave this delivery (`payhook-delivery-id`). */
  deliveryId: string;
  eventId: string;
  /** The local URL the listener forwarded to (recorded as the attempt's URL). */
  url: string;
  startedAt: Date;
  latencyMs: number;
  statusCode: number | null;
  /** The first 4 KiB of the local answer. */
  responseBody: string | null;
  error: { code: string; message: string } | null;
}

// PostgreSQL text cannot hold NUL: a receiver's binary answer is stored without it.
const text = (value: string | null | undefined) =>
  value === null || value === undefined ? null : value.replaceAll('\0', '');

/**
 * Records listener attempts as finished deliveries of one attempt each (delivered on a 2xx, failed
 * otherwise), in one statement (`insertListenerDeliveries`, a transition of
 * `delivery/delivery-state.ts`). Only events of the listener's own business and mode are recorded;
 * a delivery id already recorded is skipped (a report sent twice records once). Returns the ids
 * of the deliveries it wrote.
 *
 * @example
 * ```ts
 * const written = await recordListenerAttempts(db, { businessId, mode }, 'lst_1', attempts);
 * ```
 */
export async function recordListenerAttempts(
  db: Kysely<Schema>,
  owner: BusinessScope,
  listenerId: string,
  attempts: readonly ListenerAttempt[],
): Promise<string[]> {
  // A delivery id given twice in one report is recorded once.
  const unique = [...new Map(attempts.map((a) => [a.deliveryId, a])).values()];
  return insertListenerDeliveries(
    db,
    owner,
    cliDestination(listenerId),
    unique.map((a) => ({
      id: a.deliveryId,
      event_id: a.eventId,
      url: text(a.url),
      started_at: a.startedAt,
      finished_at: new Date(a.startedAt.getTime() + a.latencyMs),
      latency_ms: Math.round(a.latencyMs),
      status_code: a.statusCode,
      status: a.statusCode !== null && a.statusCode >= 200 && a.statusCode < 300 ? 'delivered' : 'failed',
      response_body: text(a.responseBody),
      error_code: text(a.error?.code),
      error_message: text(a.error?.message),
    })),
  );
}
