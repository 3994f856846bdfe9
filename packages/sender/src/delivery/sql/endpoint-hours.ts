import { sql } from 'kysely';
import { addHistogramsSql, attemptHoursSql } from '../../db/attempt-hours.js';

const newer = (column: string) =>
  sql.raw(`${column} = case when excluded.last_error_at > coalesce(h.last_error_at, '-infinity')
            then excluded.${column} else h.${column} end`);

/**
 * The part of the attempt-record statement (`record-attempts.ts`) that counts each endpoint's
 * attempts per hour in `endpoint_attempt_hours` (migration 0014): a CTE over its `outcomes`. One
 * row per endpoint and hour in the batch, made or added to: attempts, those delivered, the latency
 * histogram, and the hour's latest failure. What the charts and the endpoints' health read, in
 * place of a scan of the attempts (docs/decisions.md, "Counts kept as attempts are recorded").
 */
export const endpointHourCtes = sql`,
      counted as (
        insert into endpoint_attempt_hours as h
          (endpoint_id, hour, attempts, succeeded, latency_histogram,
           last_error_at, last_error_status, last_error_code, last_error_message)
        ${attemptHoursSql(sql`outcomes`)}
        on conflict (endpoint_id, hour) do update
        set attempts = h.attempts + excluded.attempts,
            succeeded = h.succeeded + excluded.succeeded,
            latency_histogram = ${addHistogramsSql(sql`h.latency_histogram`, sql`excluded.latency_histogram`)},
            ${newer('last_error_status')}, ${newer('last_error_code')}, ${newer('last_error_message')},
            last_error_at = greatest(h.last_error_at, excluded.last_error_at)
      )`;
