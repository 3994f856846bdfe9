import { type Kysely, sql, type Transaction } from 'kysely';
import { PREPARE } from '../../db/database.js';
import type { Mode, Schema } from '../../db/schema.js';
import { slotsSql, type UrlShare } from '../membership.js';

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
  /** The business and mode of the event, whose secrets sign the attempt. */
  business_id: string;
  mode: Mode;
}

/** What {@link claimDeliveries} takes. */
export interface ClaimOptions {
  /** The claim's clock: rows due at or before it are taken. */
  now: Date;
  leaseMs: number;
  limit: number;
  /** URLs to leave alone (at their concurrency limit). */
  skipUrls?: readonly string[];
  /** Deliveries to leave alone (this worker holds them already). */
  skipIds?: readonly string[];
  /** At most this many rows of any one URL (default: no limit). */
  maxPerUrl?: number;
  /** Lower limits for some URLs (the room they have left), within `maxPerUrl`. */
  urlLimits?: ReadonlyMap<string, number>;
  /**
   * With several instances: URLs where this one has none of the slots of their limit `perUrl`
   * (`slotsOf`) are left alone; the others are claimed as when alone.
   */
  share?: UrlShare & { perUrl: number };
}

/**
 * Claims up to `limit` due deliveries in one statement: `FOR UPDATE SKIP LOCKED` over the due
 * index, and the due time moved to the end of the lease, so a claimed row is not due again until
 * the lease ends (DESIGN.md; docs/decisions.md, "A claim moves the delivery's due time").
 *
 * With per-URL limits (`maxPerUrl` below `limit`, or `urlLimits`), the first `limit` due rows are
 * read, the oldest of each URL up to its limit are kept, and only those are locked and claimed: a
 * URL whose backlog is longer than it may hold gets what it has room for, and the rest of its rows
 * stay as they are, due, rather than claimed to be given back (docs/decisions.md, "Per-URL
 * concurrency").
 *
 * @example
 * ```ts
 * const claims = await claimDeliveries(db, { now: new Date(), leaseMs: 60_000, limit: 32 });
 * ```
 */
export async function claimDeliveries(
  db: Kysely<Schema> | Transaction<Schema>,
  options: ClaimOptions,
): Promise<Claim[]> {
  const { now, leaseMs, limit, skipUrls = [], skipIds = [], maxPerUrl, urlLimits, share } = options;
  const leaseEnd = new Date(now.getTime() + leaseMs);
  const shared = share && share.count > 1 ? share : undefined;
  const filters = sql`status = 'pending' and next_attempt_at <= ${now}
    ${skipUrls.length > 0 ? sql`and url <> all(${skipUrls}::text[])` : sql``}
    ${skipIds.length > 0 ? sql`and id <> all(${skipIds}::uuid[])` : sql``}
    ${shared ? sql`and ${slotsSql(shared.perUrl, shared)} > 0` : sql``}`;
  const perUrl = Math.min(maxPerUrl ?? limit, limit);
  // Only a limit below the claim's own can keep a row out.
  const limits = urlLimits ? [...urlLimits].filter(([, n]) => n < perUrl) : [];
  // A named prepared statement on PostgreSQL: planned once per connection, not at every claim.
  const due =
    perUrl >= limit && limits.length === 0
      ? sql`
        select id from deliveries
        where ${filters}
        order by next_attempt_at
        limit ${limit}
        for update skip locked`
      : sql`
        with seen as (
          select id, url, next_attempt_at from deliveries
          where ${filters}
          order by next_attempt_at
          limit ${limit}
        ),
        kept as (
          select s.id, s.next_attempt_at,
                 row_number() over (partition by s.url order by s.next_attempt_at) as n,
                 coalesce(l.room, ${perUrl}::int) as room
          from seen s
          left join json_to_recordset(${JSON.stringify(limits.map(([url, room]) => ({ url, room })))}::json)
            as l(url text, room int) on l.url = s.url
        )
        select d.id from kept k join deliveries d on d.id = k.id
        where k.n <= k.room and d.status = 'pending' and d.next_attempt_at <= ${now}
        order by k.next_attempt_at
        for update of d skip locked`;
  const result = await sql<Claim>`${sql.raw(PREPARE)}
    with due as (${due})
    update deliveries d
    set claim_token = gen_random_uuid(), next_attempt_at = ${leaseEnd}
    from due, events e
    where d.id = due.id and e.id = d.event_id
    returning d.id, d.claim_token as token, d.event_id, d.url, d.attempts, d.first_attempt_at, e.payload, e.business_id, e.mode`.execute(
    db,
  );
  return result.rows;
}
