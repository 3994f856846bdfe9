import { sql } from 'kysely';
import { addHistograms, HISTOGRAM_BUCKETS, histogramQuantile } from '../db/attempt-hours.js';
import type { Db, EndpointAttemptHoursTable } from '../db/schema.js';

const HOUR_MS = 3_600_000;

/** Attempts counted over a span of hours (one bucket of a chart, or a health window). */
export interface AttemptCounts {
  attempts: number;
  /** Attempts answered 200. */
  succeeded: number;
  /** The median latency, read from the hours' histograms (whole ms); null without attempts. */
  p50LatencyMs: number | null;
  /** The latest failed attempt, if any. */
  lastError: { at: Date; statusCode: number | null; code: string; message: string } | null;
}

/** A row of `endpoint_attempt_hours`. */
type HourRow = EndpointAttemptHoursTable;

/** A running sum of hour rows. */
class Tally {
  attempts = 0;
  succeeded = 0;
  readonly histogram: number[] = new Array(HISTOGRAM_BUCKETS).fill(0);
  lastError: AttemptCounts['lastError'] = null;

  add(row: HourRow): void {
    this.attempts += row.attempts;
    this.succeeded += row.succeeded;
    addHistograms(this.histogram, row.latency_histogram);
    if (row.last_error_at && (!this.lastError || row.last_error_at > this.lastError.at)) {
      this.lastError = {
        at: row.last_error_at,
        statusCode: row.last_error_status,
        code: row.last_error_code ?? 'unknown',
        message: row.last_error_message ?? '',
      };
    }
  }

  counts(): AttemptCounts {
    return {
      attempts: this.attempts,
      succeeded: this.succeeded,
      p50LatencyMs: histogramQuantile(this.histogram, 0.5),
      lastError: this.lastError,
    };
  }
}

/** The start of the hour of `time` (UTC), in ms. */
export const hourStart = (time: Date): number => Math.floor(time.getTime() / HOUR_MS) * HOUR_MS;

function hourRows(db: Db, endpointIds: readonly string[], from: number, until: number) {
  return sql<HourRow>`select endpoint_id, hour, attempts, succeeded, latency_histogram,
      last_error_at, last_error_status, last_error_code, last_error_message
    from endpoint_attempt_hours
    where endpoint_id = any(${endpointIds}::uuid[]) and hour >= ${new Date(from)} and hour < ${new Date(until)}`.execute(
    db,
  );
}

/**
 * An endpoint's attempts in `count` buckets of `bucketHours` hours each, the last one holding the
 * hour of `now`, oldest first: the dashboard's charts and `GET /webhook-endpoints/{id}/stats`. Reads
 * the counts kept as attempts are recorded (`endpoint_attempt_hours`, one row an hour), never the
 * attempts: its cost is the window's hours, whatever the traffic.
 *
 * @example
 * ```ts
 * const day = await endpointBuckets(db, endpoint.id, { count: 24, bucketHours: 1, now: new Date() });
 * ```
 */
export async function endpointBuckets(
  db: Db,
  endpointId: string,
  window: { count: number; bucketHours: number; now: Date },
): Promise<{ start: Date; counts: AttemptCounts }[]> {
  const bucketMs = window.bucketHours * HOUR_MS;
  const end = hourStart(window.now) + HOUR_MS;
  const from = end - window.count * bucketMs;
  const tallies = Array.from({ length: window.count }, () => new Tally());
  const { rows } = await hourRows(db, [endpointId], from, end);
  for (const row of rows) tallies[Math.floor((row.hour.getTime() - from) / bucketMs)]?.add(row);
  return tallies.map((tally, i) => ({ start: new Date(from + i * bucketMs), counts: tally.counts() }));
}

/**
 * The attempts of the endpoints `keyOf` names, over the last `hours` whole hours (the hour of
 * `now` included), from the same counts as {@link endpointBuckets}, summed per `keyOf(id)` (the
 * endpoint itself, or its URL).
 *
 * @example
 * ```ts
 * const health = await endpointTotals(db, new Map(endpoints.map((e) => [e.id, e.url])), {
 *   hours: 24,
 *   now: new Date(),
 * });
 * ```
 */
export async function endpointTotals(
  db: Db,
  keyOf: ReadonlyMap<string, string>,
  window: { hours: number; now: Date },
): Promise<Map<string, AttemptCounts>> {
  const end = hourStart(window.now) + HOUR_MS;
  const tallies = new Map<string, Tally>();
  if (keyOf.size > 0) {
    const { rows } = await hourRows(db, [...keyOf.keys()], end - window.hours * HOUR_MS, end);
    for (const row of rows) {
      const key = keyOf.get(row.endpoint_id) as string;
      const tally = tallies.get(key) ?? new Tally();
      tallies.set(key, tally);
      tally.add(row);
    }
  }
  return new Map([...tallies].map(([id, tally]) => [id, tally.counts()]));
}
