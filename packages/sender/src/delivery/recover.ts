import { sql, type Transaction } from 'kysely';
import type { Mode, Schema } from '../db/schema.js';
import { endpointTakesSql } from '../endpoints/filter.js';
import { enqueueDeliveries, WAKE } from './delivery-state.js';
import { isWebhookUrl } from './destination.js';

/** How far back a recovery may reach: events created at most this many days ago. */
export const RECOVER_MAX_DAYS = 14;

/** The endpoint a recovery is for: its business, URL, filter and age. */
export interface RecoveredEndpoint {
  id: string;
  business_id: string;
  mode: Mode;
  url: string;
  created_at: Date;
}

/** What {@link recoverEndpoint} queued. */
export interface Recovery {
  /** Deliveries queued: new ones in place of failures and of events never sent, and held ones made due. */
  queued: number;
  /** New deliveries, each with its own 48 hours (in place of a failure, or of an event never sent). */
  created: number;
  /** Deliveries never attempted, made due now. */
  resumed: number;
}

interface Candidate {
  event_id: string;
  event_created_at: Date;
  id: string | null;
  status: 'pending' | 'delivered' | 'failed' | null;
  attempts: number | null;
  superseded_by: string | null;
}

/**
 * Recovers a window of an endpoint's events, in the caller's transaction: every event of its
 * business and mode created in `[since, until)` that the endpoint's filter takes is sent to it
 * again when it was never delivered there, each as a delivery with its own 48 hours:
 * - a failed delivery (not redelivered yet) gets a new delivery in its place, marked as replaced
 *   (`superseded_by`), as a redelivery does;
 * - a pending delivery never attempted (one held while the endpoint was disabled) is made due now;
 * - an event that has no delivery to the endpoint (made while it was disabled, or while its
 *   filter left the type out) gets one, if the endpoint existed when the event was made.
 * An event delivered to the endpoint, or still being tried there, is left alone: a recovery never
 * sends a delivered event again. Deliveries older than endpoints (no endpoint, the same URL)
 * count as the endpoint's. Two recoveries of one endpoint queue one after the other (the
 * endpoint's row is locked). A disabled endpoint's recovered deliveries are held with its others
 * until it is enabled.
 *
 * @example
 * ```ts
 * const { queued } = await db.transaction().execute((tx) =>
 *   recoverEndpoint(tx, endpoint, { since, until: new Date(), now: new Date() }),
 * );
 * ```
 */
export async function recoverEndpoint(
  tx: Transaction<Schema>,
  endpoint: RecoveredEndpoint,
  window: { since: Date; until: Date; now: Date },
): Promise<Recovery> {
  await sql`select 1 from webhook_endpoints where id = ${endpoint.id}::uuid for update`.execute(tx);
  const { rows } = await sql<Candidate>`select e.id as event_id, e.created_at as event_created_at,
      d.id, d.status, d.attempts, d.superseded_by
    from webhook_endpoints ep
    join events e on e.business_id = ep.business_id and e.mode = ep.mode
    left join deliveries d on d.event_id = e.id
      and (d.endpoint_id = ep.id or (d.endpoint_id is null and d.url = ep.url and ${isWebhookUrl('d.url')}))
    where ep.id = ${endpoint.id}::uuid
      and e.created_at >= ${window.since} and e.created_at < ${window.until}
      and ${endpointTakesSql('ep', sql.ref('e.type'))}
    order by e.created_at, e.id`.execute(tx);

  const byEvent = new Map<string, Candidate[]>();
  for (const row of rows) {
    const list = byEvent.get(row.event_id);
    if (list) list.push(row);
    else byEvent.set(row.event_id, [row]);
  }
  const neverSent: string[] = [];
  const failed: string[] = [];
  const unattempted: string[] = [];
  for (const [eventId, list] of byEvent) {
    const deliveries = list.filter((c) => c.id !== null);
    if (deliveries.length === 0) {
      if (new Date(list[0]?.event_created_at as Date) >= new Date(endpoint.created_at))
        neverSent.push(eventId);
      continue;
    }
    if (deliveries.some((d) => d.status === 'delivered')) continue;
    const pending = deliveries.filter((d) => d.status === 'pending');
    if (pending.length > 0) {
      // Being tried: left alone, unless it never was (held while the endpoint was disabled).
      if (pending.every((d) => d.attempts === 0)) unattempted.push(...pending.map((d) => d.id as string));
      continue;
    }
    failed.push(...deliveries.filter((d) => d.superseded_by === null).map((d) => d.id as string));
  }

  let resumed = 0;
  if (unattempted.length > 0) {
    const { rows: due } = await sql<{ id: string }>`update deliveries set next_attempt_at = ${window.now}
      where id = any(${unattempted}::uuid[]) and status = 'pending' and attempts = 0 and claim_token is null
      returning id`.execute(tx);
    resumed = due.length;
  }
  // The failures still not replaced, locked: a bulk redelivery running now skips them.
  const replaced =
    failed.length === 0
      ? []
      : (
          await sql<{ id: string; event_id: string }>`select id, event_id from deliveries
            where id = any(${failed}::uuid[]) and status = 'failed' and superseded_by is null
            order by id for update`.execute(tx)
        ).rows;
  const made = [...new Set([...replaced.map((r) => r.event_id), ...neverSent])];
  const ids = await enqueueDeliveries(
    tx,
    made.map((eventId) => ({ eventId, url: endpoint.url, endpointId: endpoint.id })),
  );
  const newIdOf = new Map(made.map((eventId, i) => [eventId, ids[i] as string]));
  if (replaced.length > 0) {
    const pairs = JSON.stringify(replaced.map((r) => ({ id: r.id, by: newIdOf.get(r.event_id) })));
    await sql`update deliveries d set superseded_by = p.by
      from json_to_recordset(${pairs}::json) as p(id uuid, by uuid) where d.id = p.id`.execute(tx);
  }
  if (resumed > 0 && ids.length === 0) await sql`select ${WAKE}`.execute(tx);
  return { queued: ids.length + resumed, created: ids.length, resumed };
}
