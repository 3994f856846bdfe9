import { type Kysely, sql, type Transaction } from 'kysely';
import { PREPARE } from '../db/database.js';
import type { Schema } from '../db/schema.js';

/** A claimed delivery, with what its attempt sends. */
export interface Claim {
  id: string;
  /** Proves the claim: only its holder may record the attempt. */
  token: string;
  event_id: string;
  url: string;
  /** Attempts made before this one. */
  attempts: number;
  first_attempt_at: Date | null;
  /** The event's signed bytes. */
  payload: string;
}

/** What {@link claimDeliveries} takes. */
export interface ClaimOptions {
  /** The claim's clock: rows due at or before it are taken. */
  now: Date;
  leaseMs: number;
  limit: number;
  /**
   * At most this many rows for any one URL. Given, the claim walks the pending deliveries URL by
   * URL (the `deliveries_url_due` index): its cost follows the number of URLs with pending
   * deliveries, not the length of any one URL's backlog.
   */
  perUrlLimit?: number;
  /**
   * Lower limits for some URLs (the rows the caller may still take of a URL it already holds rows
   * of; 0 leaves the URL out). Only with `perUrlLimit`.
   */
  urlLimits?: ReadonlyMap<string, number>;
  /** Deliveries to leave alone (this worker holds them already). */
  skipIds?: readonly string[];
}

/**
 * Claims up to `limit` due deliveries in one statement, oldest due first: `FOR UPDATE SKIP LOCKED`,
 * and the due time moved to the end of the lease, so a claimed row is not due again until the
 * lease ends (DESIGN.md; docs/decisions.md, "A claim moves the delivery's due time"). Without
 * `perUrlLimit` it walks the due index; with it, each URL's due rows up to that URL's limit
 * (docs/decisions.md, "Claims take a few rows per URL").
 *
 * @example
 * ```ts
 * const claims = await claimDeliveries(db, { now: new Date(), leaseMs: 60_000, limit: 32, perUrlLimit: 8 });
 * ```
 */
export async function claimDeliveries(
  db: Kysely<Schema> | Transaction<Schema>,
  options: ClaimOptions,
): Promise<Claim[]> {
  const { now, leaseMs, limit, perUrlLimit, urlLimits, skipIds = [] } = options;
  const leaseEnd = new Date(now.getTime() + leaseMs);
  const skip = skipIds.length > 0 ? sql`and d.id <> all(${skipIds}::uuid[])` : sql``;
  let due: ReturnType<typeof sql>;
  if (perUrlLimit === undefined) {
    due = sql`with due as (
      select d.id from deliveries d
      where d.status = 'pending' and d.next_attempt_at <= ${now} ${skip}
      order by d.next_attempt_at
      limit ${limit}
      for update skip locked
    )`;
  } else {
    const limits = JSON.stringify([...(urlLimits ?? [])].map(([url, n]) => ({ url, n: Math.max(0, n) })));
    // The URLs with pending deliveries, one index descent each (a loose index scan), then each
    // one's due rows up to its limit, and the oldest `limit` of those.
    due = sql`with recursive
    urls (url) as (
      (select url from deliveries where status = 'pending' order by url limit 1)
      union all
      select (select d.url from deliveries d where d.status = 'pending' and d.url > urls.url order by d.url limit 1)
      from urls where urls.url is not null
    ),
    limits as (select * from json_to_recordset(${limits}::json) as l(url text, n integer)),
    due as (
      select c.id from urls
      cross join lateral (
        select d.id, d.next_attempt_at from deliveries d
        where d.status = 'pending' and d.url = urls.url and d.next_attempt_at <= ${now} ${skip}
        order by d.next_attempt_at
        limit coalesce((select l.n from limits l where l.url = urls.url), ${perUrlLimit}::int)
        for update skip locked
      ) c
      where urls.url is not null
      order by c.next_attempt_at
      limit ${limit}
    )`;
  }
  // A named prepared statement on PostgreSQL: planned once per connection, not at every claim.
  const result = await sql<Claim>`${sql.raw(PREPARE)}
    ${due}
    update deliveries d
    set claim_token = gen_random_uuid(), next_attempt_at = ${leaseEnd}
    from due, events e
    where d.id = due.id and e.id = d.event_id
    returning d.id, d.claim_token as token, d.event_id, d.url, d.attempts, d.first_attempt_at, e.payload`.execute(
    db,
  );
  return result.rows;
}
