import { type RawBuilder, sql } from 'kysely';

/**
 * The upper bounds, in milliseconds, of the buckets of the latency histograms that
 * `endpoint_attempt_hours` keeps (migration 0014): bucket 0 holds latencies under 1 ms, bucket
 * `i` those in `[BOUNDS[i - 1], BOUNDS[i])`, and the last one those of 30 s and more. Roughly
 * three buckets a decade, so a median read from them is within a third of the true one, and
 * usually much closer. Part of the schema: the rows written so far count by these bounds, and
 * migration 0014 checks the bucket count (it holds its own copy of both, as shipped), so a change
 * needs a migration that rewrites the rows and the check.
 */
export const LATENCY_BOUNDS_MS = [
  1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, 150, 200, 300, 500, 700, 1000, 1500, 2000, 3000, 5000, 7000,
  10000, 15000, 20000, 30000,
] as const;

/** Buckets in a histogram: one per bound, and the last for latencies past them. */
export const HISTOGRAM_BUCKETS = LATENCY_BOUNDS_MS.length + 1;

const BOUNDS_SQL = sql.raw(`array[${LATENCY_BOUNDS_MS.join(', ')}]::int[]`);

/** SQL: the 1-based position, in a histogram array, of the bucket of the latency `column`. */
export const latencyBucketSql = (column: RawBuilder<unknown>): RawBuilder<number> =>
  sql<number>`(width_bucket(${column}, ${BOUNDS_SQL}) + 1)`;

/** SQL: the histogram (an `int[]` of {@link HISTOGRAM_BUCKETS}) of an `int[]` of bucket positions. */
export const histogramOfSql = (positions: RawBuilder<unknown>): RawBuilder<number[]> =>
  sql<number[]>`(select array_agg((select count(*) from unnest(${positions}) p where p = i)::int order by i)
    from generate_series(1, ${sql.lit(HISTOGRAM_BUCKETS)}) i)`;

/** SQL: the start of the UTC hour of the time `column` (the same in every session's time zone). */
export const hourOfSql = (column: RawBuilder<unknown>): RawBuilder<Date> =>
  sql<Date>`to_timestamp(floor(extract(epoch from ${column}) / 3600) * 3600)`;

/**
 * SQL: the rows of `endpoint_attempt_hours` (migration 0014) that the attempts of `source` make,
 * one per endpoint and hour: attempts, those delivered (`ok`), the latency histogram and the
 * hour's latest failure. `source` is a relation with `endpoint_id`, `started_at`, `latency_ms`,
 * `ok`, `status_code`, `error_code` and `error_message`: the attempt-record statement's outcomes
 * (migration 0014's backfill made the first rows with a copy of this statement, as it shipped).
 */
export const attemptHoursSql = (source: RawBuilder<unknown>): RawBuilder<unknown> => sql`
  select endpoint_id, hour, attempts, succeeded, ${histogramOfSql(sql.ref('positions'))} as latency_histogram,
         last_error_at, last_error_status, last_error_code, last_error_message
  from (
    select endpoint_id, ${hourOfSql(sql.ref('started_at'))} as hour, count(*)::int as attempts,
           count(*) filter (where ok)::int as succeeded,
           array_agg(${latencyBucketSql(sql.ref('latency_ms'))}) as positions,
           max(started_at) filter (where not ok) as last_error_at,
           (array_agg(status_code order by started_at desc) filter (where not ok))[1] as last_error_status,
           (array_agg(error_code order by started_at desc) filter (where not ok))[1] as last_error_code,
           (array_agg(left(error_message, 1000) order by started_at desc) filter (where not ok))[1]
             as last_error_message
    from ${source} s
    group by endpoint_id, 2
  ) g`;

/** SQL: two histograms added bucket by bucket. */
export const addHistogramsSql = (a: RawBuilder<unknown>, b: RawBuilder<unknown>): RawBuilder<number[]> =>
  sql<number[]>`(select array_agg(x + y order by i) from unnest(${a}, ${b}) with ordinality as u(x, y, i))`;

/**
 * The `q` quantile (0 to 1) of the latencies a histogram counts, interpolated within its bucket as
 * Prometheus's `histogram_quantile` does, in whole milliseconds; `null` when it counts none. Past
 * the last bound, the last bound.
 *
 * @example
 * ```ts
 * histogramQuantile(row.latency_histogram, 0.5); // the median, in ms
 * ```
 */
export function histogramQuantile(counts: readonly number[], q: number): number | null {
  const total = counts.reduce((sum, n) => sum + n, 0);
  if (total === 0) return null;
  const rank = q * total;
  let before = 0;
  for (let i = 0; i < counts.length; i++) {
    const n = counts[i] ?? 0;
    if (n > 0 && before + n >= rank) {
      const lower = i === 0 ? 0 : (LATENCY_BOUNDS_MS[i - 1] as number);
      const upper = LATENCY_BOUNDS_MS[i] ?? lower;
      return Math.round(lower + ((upper - lower) * (rank - before)) / n);
    }
    before += n;
  }
  return LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.length - 1] as number;
}

/** Histograms added bucket by bucket (rows of several hours into one bucket of a chart). */
export function addHistograms(into: number[], from: readonly number[]): number[] {
  for (let i = 0; i < from.length; i++) into[i] = (into[i] ?? 0) + (from[i] ?? 0);
  return into;
}
