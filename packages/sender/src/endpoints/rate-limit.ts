// The per-endpoint rate limit (`rate_limit_per_second`), held across sender instances the way the
// per-URL limit is: in the database. Each endpoint row keeps `next_send_at`, the earliest time its
// next attempt may start; an attempt reserves that send time (or now, if later) and moves it one
// interval on, in one statement under the row's lock, so two instances never reserve one send time
// (docs/decisions.md, "A rate limit per endpoint"). Its words are "reserve" and "send time", not
// the pace or the slots of the worker's glossary (docs/architecture.md).
import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import type { Database } from '../db/database.js';
import { RATE_CACHE_MS, RATE_HORIZON_MS } from '../delivery/tuning.js';

export { RATE_CACHE_MS, RATE_HORIZON_MS };

/** What an attempt to a rate-limited endpoint does: start at `sendAt`, or go back until `dueAt`. */
export type Reservation = { sendAt: Date } | { dueAt: Date };

/** The rate limiter of one delivery worker. */
export interface EndpointRateLimiter {
  /**
   * Reserves the send time of one attempt to `endpointId` asked at `at` (the worker's clock):
   * undefined when the endpoint has no limit (or is gone), else a send time within
   * {@link RATE_HORIZON_MS} (reserved), or the time to try again.
   */
  reserve(endpointId: string, at: Date): Promise<Reservation | undefined>;
}

/**
 * Creates a worker's rate limiter: the endpoints' limits are read at most every
 * {@link RATE_CACHE_MS} (so an attempt to an endpoint without a limit costs no statement), and a
 * limited endpoint's send time is reserved in the database. `clock` (ms) times the reserving
 * statements' round trip, which sets the earliest send time an attempt reserves.
 *
 * @example
 * ```ts
 * const reserved = await createRateLimiter(database).reserve(claim.endpoint_id, new Date());
 * ```
 */
export function createRateLimiter(
  database: Database,
  clock: () => number = () => performance.now(),
): EndpointRateLimiter {
  const limits = new Map<string, { limited: boolean; readAt: number }>();
  /**
   * How long a reserving statement takes to come back (ms, a moving average). The first send time
   * free is reserved no earlier than that after the ask: a send time granted already past when its
   * answer arrives would start at once, beside the send times after it, and the receiver would see
   * a burst above the limit by the round trip's worth (about 6 % at 100 a second, PostgreSQL 15 ms
   * away each way).
   */
  let roundTripMs = 0;

  async function limited(endpointId: string): Promise<boolean> {
    const cached = limits.get(endpointId);
    if (cached && clock() - cached.readAt < RATE_CACHE_MS) return cached.limited;
    const row = await database.delivery((db) =>
      db
        .selectFrom('webhook_endpoints')
        .select('rate_limit_per_second')
        .where('id', '=', endpointId)
        .executeTakeFirst(),
    );
    const isLimited = row?.rate_limit_per_second != null;
    if (limits.size > 10_000) limits.clear();
    limits.set(endpointId, { limited: isLimited, readAt: clock() });
    return isLimited;
  }

  return {
    async reserve(endpointId, at) {
      if (!(await limited(endpointId))) return undefined;
      const horizon = new Date(at.getTime() + RATE_HORIZON_MS);
      const asked = clock();
      const earliest = new Date(at.getTime() + Math.ceil(roundTripMs));
      const { rows } = await database.delivery((db) =>
        sql<{ rate: number | null; free_at: Date; granted: boolean }>`
          with cur as (
            select id, rate_limit_per_second as rate,
                   greatest(coalesce(next_send_at, ${earliest}::timestamptz), ${earliest}::timestamptz) as free_at
            from webhook_endpoints where id = ${endpointId}::uuid
            for update
          ),
          taken as (
            update webhook_endpoints e
            set next_send_at = cur.free_at + (1000.0 / cur.rate) * interval '1 millisecond'
            from cur
            where e.id = cur.id and cur.rate is not null and cur.free_at < ${horizon}::timestamptz
            returning e.id
          )
          select cur.rate, cur.free_at, exists (select from taken) as granted from cur`.execute(db),
      );
      const took = clock() - asked;
      roundTripMs += (took - roundTripMs) / 8;
      const row = rows[0];
      if (!row || row.rate === null) {
        limits.set(endpointId, { limited: false, readAt: clock() });
        return undefined;
      }
      const freeAt = new Date(row.free_at);
      if (row.granted) return { sendAt: freeAt };
      return { dueAt: new Date(freeAt.getTime() - RATE_HORIZON_MS) };
    },
  };
}
