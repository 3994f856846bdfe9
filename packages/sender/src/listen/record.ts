import { type Kysely, sql } from 'kysely';
import type { Mode, Schema } from '../db/schema.js';
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
 * otherwise), in one statement. Only events of the listener's own business and mode are recorded;
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
  owner: { businessId: string; mode: Mode },
  listenerId: string,
  attempts: readonly ListenerAttempt[],
): Promise<string[]> {
  // A delivery id given twice in one report is recorded once.
  const unique = [...new Map(attempts.map((a) => [a.deliveryId, a])).values()];
  if (unique.length === 0) return [];
  const values = JSON.stringify(
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
  const result = await sql<{ id: string }>`
    with v as (
      select * from json_to_recordset(${values}::json) as v(
        id uuid, event_id uuid, url text, started_at timestamptz, finished_at timestamptz,
        latency_ms integer, status_code integer, status text, response_body text, error_code text,
        error_message text)
    ),
    d as (
      insert into deliveries (id, event_id, url, status, attempts, next_attempt_at, first_attempt_at,
                              last_attempt_at, finished_at, last_status_code, last_error)
      select v.id, v.event_id, ${cliDestination(listenerId)}, v.status, 1, v.started_at, v.started_at,
             v.started_at, v.finished_at, v.status_code, coalesce(v.error_message, v.error_code)
      from v
      join events e on e.id = v.event_id and e.business_id = ${owner.businessId} and e.mode = ${owner.mode}
      on conflict (id) do nothing
      returning id
    )
    insert into delivery_attempts
      (delivery_id, attempt, url, started_at, latency_ms, status_code, response_body, error_code, error_message)
    select v.id, 1, v.url, v.started_at, v.latency_ms, v.status_code, v.response_body, v.error_code, v.error_message
    from v join d on d.id = v.id
    returning delivery_id as id`.execute(db);
  return result.rows.map((r) => r.id);
}
