import { type RawBuilder, sql } from 'kysely';
import { PREPARE } from '../../db/database.js';
import type { AttemptOutcome } from '../attempt-outcome.js';
import { isWebhookUrl } from '../destination.js';
import type { Claim } from './claim-deliveries.js';
import { endpointFailureCtes } from './endpoint-failures.js';
import { endpointHourCtes } from './endpoint-hours.js';

/** One attempt to record, and the state its delivery moves to. */
export interface AttemptRecord {
  claim: Claim;
  /** Attempts made, this one included. */
  attempts: number;
  first: Date;
  /** The next attempt's due time; `null` when the delivery is finished. */
  next: Date | null;
  status: 'delivered' | 'failed' | 'pending';
  startedAt: Date;
  outcome: AttemptOutcome;
}

// PostgreSQL text cannot hold NUL: a receiver's binary answer is stored without it.
const text = (value: string | null | undefined) =>
  value === null || value === undefined ? null : value.replaceAll('\0', '');

/**
 * A delivery failed for good marks its event (what `delivery_status=failed` looks among), even one
 * marked already: the row's lock orders this against a redelivery clearing it. Read from `kept`,
 * so that the deliveries are locked before the events, as everywhere. Only in a batch with such a
 * delivery: the others run the statement without it.
 */
const failedMarks = sql`failed as (
        update events e set failed_delivery = true
        where e.id = any(array(
          select d.event_id from kept k join v on v.id = k.id join deliveries d on d.id = k.id
          where v.status = 'failed' and ${isWebhookUrl('d.url')}))
      ),`;

/**
 * The statement that records attempts, many at once: each delivery whose claim token still
 * matches takes its next state (and loses its claim), an attempt row is written for each of
 * those, the events of deliveries that failed for good are marked `failed_delivery`, and each
 * endpoint's run of failures and its hourly counts are kept up to date (`endpointFailureCtes`,
 * `endpointHourCtes`). It returns their ids, so a record whose lease was lost is known. Run it
 * with `database.delivery`.
 *
 * @example
 * ```ts
 * const kept = await database.delivery((db) => recordAttemptsStatement(records, finishedAt).execute(db));
 * ```
 */
export function recordAttemptsStatement(
  rows: readonly AttemptRecord[],
  finishedAt: string,
): RawBuilder<{ id: string }> {
  // One JSON parameter (one native JSON.stringify) rather than an array parameter per column,
  // each escaped element by element by the driver.
  const values = JSON.stringify(
    rows.map((r) => ({
      id: r.claim.id,
      token: r.claim.token,
      status: r.status,
      attempts: r.attempts,
      first_attempt_at: r.first,
      started_at: r.startedAt,
      next_attempt_at: r.next,
      status_code: r.outcome.statusCode,
      error_message: text(r.outcome.error?.message),
      error_code: text(r.outcome.error?.code),
      url: r.claim.url,
      latency_ms: Math.round(r.outcome.latencyMs),
      response_body: text(r.outcome.responseBody),
    })),
  );
  return sql<{ id: string }>`${sql.raw(PREPARE)}
      with v as (
        select * from json_to_recordset(${values}::json) as v(
          id uuid, token uuid, status text, attempts integer, first_attempt_at timestamptz,
          started_at timestamptz, next_attempt_at timestamptz, status_code integer, error_message text,
          error_code text, url text, latency_ms integer, response_body text)
      ),
      kept as (
        update deliveries d
        set status = v.status, attempts = v.attempts, first_attempt_at = v.first_attempt_at,
            last_attempt_at = v.started_at, last_status_code = v.status_code, last_error = v.error_message,
            claim_token = null, next_attempt_at = coalesce(v.next_attempt_at, d.next_attempt_at),
            finished_at = case when v.next_attempt_at is null then ${finishedAt}::timestamptz end
        from v
        where d.id = v.id and d.claim_token = v.token
        returning v.id, v.attempts, v.url, v.started_at, v.latency_ms, v.status_code, v.response_body,
                  v.error_code, v.error_message
      ),
      ${rows.some((r) => r.status === 'failed') ? failedMarks : sql``}
      outcomes as (
        select d.endpoint_id, v.started_at, v.status = 'delivered' as ok, v.latency_ms, v.status_code,
               v.error_code, v.error_message
        from v join deliveries d on d.id = v.id and d.claim_token = v.token
        where d.endpoint_id is not null
      )${endpointFailureCtes}${endpointHourCtes}
      insert into delivery_attempts
        (delivery_id, attempt, url, started_at, latency_ms, status_code, response_body, error_code, error_message)
      select * from kept
      returning delivery_id as id`;
}
