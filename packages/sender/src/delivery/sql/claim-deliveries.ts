import { type Kysely, sql, type Transaction } from 'kysely';
import { PREPARE } from '../../db/database.js';
import type { Mode, Schema } from '../../db/schema.js';
import { slotsSql, type UrlShare } from '../membership.js';
import { endpointDisabled, endpointDisabledLocked, HELD_UNTIL } from './held-deliveries.js';

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
  /** When the event was written (the database's clock): the start of the delivery latency metrics. */
  event_created_at: Date;
  /** The endpoint the delivery was made for, whose secrets sign it; null before endpoints. */
  endpoint_id: string | null;
}

/**
 * A URL with a backlog longer than it may hold, whose due rows past its `room` a claim moves to
 * their turn rather than walk past again: the first one it moves is due at `from`, each next one
 * `stepMs` later.
 */
export interface PacedUrl {
  url: string;
  from: Date;
  /** Milliseconds between two rows' turns: the URL's time per attempt over its limit. */
  stepMs: number;
  /** Its oldest rows the claim takes before it paces the others (default 0). */
  room?: number;
}

const OWNER = /^[0-9a-f]{8}$/;

/** A fresh claim token, beginning with `owner` when given. */
function claimToken(owner: string | undefined) {
  if (owner === undefined) return sql`gen_random_uuid()`;
  if (!OWNER.test(owner)) throw new TypeError(`Invalid claim owner: ${owner} (8 lower-case hex digits).`);
  return sql`overlay(gen_random_uuid()::text placing ${owner} from 1 for 8)::uuid`;
}

/** What {@link claimDeliveries} takes. */
export interface ClaimOptions {
  /** The claim's clock: rows due at or before it are taken. */
  now: Date;
  /**
   * Eight hex digits that begin every token this worker's claims make, so that it can find the
   * claims it made and never heard back of (see `releaseOrphanedClaims`). Default: none (random).
   */
  owner?: string;
  leaseMs: number;
  /** Due rows read at most (in due order): the bound of the claim's walk. */
  limit: number;
  /** Deliveries to leave alone (this worker holds them already). */
  skipIds?: readonly string[];
  /** At most this many rows of any one URL (default: no limit). */
  maxPerUrl?: number;
  /** Other limits for some URLs (the room they have left, lower or higher than `maxPerUrl`). */
  urlLimits?: ReadonlyMap<string, number>;
  /**
   * URLs whose backlog is longer than they may hold: of their due rows that the walk reads, those
   * past the URL's `room` are not claimed but moved to their turn (see {@link PacedUrl}), out of
   * the way of other URLs' rows due after them.
   */
  paced?: readonly PacedUrl[];
  /**
   * With several instances: URLs where this one has none of the slots of their limit `perUrl`
   * (`slotsOf`) are left alone; the others are claimed as when alone.
   */
  share?: UrlShare & { perUrl: number };
}

/** What a claim did: the rows it claimed, and the last turn it gave each paced URL's rows. */
export interface ClaimResult {
  claims: Claim[];
  /** Per paced URL whose rows it moved: how many, and the turn of the last one. */
  paced: Map<string, { rows: number; until: Date }>;
}

type Row = Claim & { paced_to: Date | null };

/** What a claim returns of each row it claims (`d`, with its event `e`), in either statement. */
const CLAIMED = sql`d.id, d.claim_token as token, d.event_id, d.url, d.attempts, d.first_attempt_at,
  e.payload, e.business_id, e.mode, e.created_at as event_created_at, d.endpoint_id,
  null::timestamptz as paced_to`;

/** The rows a claim may take: pending, due at `now`, and where `share` gives this instance a slot. */
function dueFilter(now: Date, share: ClaimOptions['share']) {
  const shared = share && share.count > 1 ? share : undefined;
  return sql`status = 'pending' and next_attempt_at <= ${now}
    ${shared ? sql`and ${slotsSql(shared.perUrl, shared)} > 0` : sql``}`;
}

/**
 * Claims due deliveries in one statement: it reads at most `limit` due rows in due order (`FOR
 * UPDATE SKIP LOCKED` over the due index), and moves the due time of those it keeps to the end of
 * the lease, so a claimed row is not due again until the lease ends (docs/design.md, "Delivery
 * worker"; docs/decisions.md, "A claim moves the delivery's due time").
 *
 * A due delivery of a disabled endpoint is not claimed but held (`./held-deliveries.ts`): due at
 * {@link HELD_UNTIL}, past every claim's walk, until enabling the endpoint resumes it.
 *
 * With per-URL limits (`maxPerUrl` below `limit`, or `urlLimits`), the oldest rows of each URL up
 * to its limit are kept and the rest stay due, untouched. The rows of a `paced` URL past its room
 * are moved to their turn instead: a URL's backlog costs each claim no more than the rows it
 * reads, and the rows of other URLs behind it are reached by the next claim, whatever the
 * backlog's length (docs/decisions.md, "One URL's backlog").
 *
 * @example
 * ```ts
 * const { claims } = await claimDeliveries(db, { now: new Date(), leaseMs: 60_000, limit: 32 });
 * ```
 */
export async function claimDeliveries(
  db: Kysely<Schema> | Transaction<Schema>,
  options: ClaimOptions,
): Promise<ClaimResult> {
  const { now, leaseMs, limit, skipIds = [], maxPerUrl, urlLimits, paced = [], share } = options;
  const leaseEnd = new Date(now.getTime() + leaseMs);
  const token = claimToken(options.owner);
  const filters = sql`${dueFilter(now, share)}
    ${skipIds.length > 0 ? sql`and id <> all(${skipIds}::uuid[])` : sql``}`;
  const perUrl = Math.min(maxPerUrl ?? limit, limit);
  // A limit that differs from the default (and is below the claim's own) changes what is kept.
  const limits = urlLimits
    ? [...urlLimits].filter(([, n]) => n !== perUrl && (n < limit || perUrl < limit))
    : [];
  const paces = paced.map((p) => ({
    url: p.url,
    from_ms: p.from.getTime(),
    step_ms: p.stepMs,
    room: p.room ?? 0,
  }));
  const result =
    perUrl >= limit && limits.length === 0 && paces.length === 0
      ? await sql<Row>`${sql.raw(PREPARE)}
        with due as (
          select id from deliveries
          where ${filters}
          order by next_attempt_at
          limit ${limit}
          for update skip locked
        ),
        held as (
          update deliveries d set next_attempt_at = ${HELD_UNTIL}
          from due where d.id = due.id and ${endpointDisabledLocked('d')}
          returning d.id
        )
        update deliveries d
        set claim_token = ${token}, next_attempt_at = ${leaseEnd}
        from due, events e
        where d.id = due.id and e.id = d.event_id and not ${endpointDisabled('d')}
        returning ${CLAIMED}`.execute(db)
      : // A named prepared statement on PostgreSQL: planned once per connection, not at every claim.
        await sql<Row>`${sql.raw(PREPARE)}
        with seen as (
          select id, url, next_attempt_at from deliveries
          where ${filters}
          order by next_attempt_at
          limit ${limit}
        ),
        ranked as (
          select s.id, s.next_attempt_at,
                 row_number() over (partition by s.url order by s.next_attempt_at) as n,
                 case when p.url is null then coalesce(l.room, ${perUrl}::int) else p.room end as room,
                 p.from_ms, p.step_ms
          from seen s
          left join json_to_recordset(${JSON.stringify(limits.map(([url, room]) => ({ url, room })))}::json)
            as l(url text, room int) on l.url = s.url
          left join json_to_recordset(${JSON.stringify(paces)}::json)
            as p(url text, from_ms float8, step_ms float8, room int) on p.url = s.url
        ),
        locked as (
          select d.id, r.n, r.room, r.from_ms, r.step_ms from ranked r join deliveries d on d.id = r.id
          where (r.n <= r.room or r.step_ms is not null)
            and d.status = 'pending' and d.next_attempt_at <= ${now}
          order by r.next_attempt_at
          for update of d skip locked
        ),
        held as (
          update deliveries d set next_attempt_at = ${HELD_UNTIL}
          from locked l where d.id = l.id and ${endpointDisabledLocked('d')}
          returning d.id
        ),
        claimed as (
          update deliveries d
          set claim_token = ${token}, next_attempt_at = ${leaseEnd}
          from locked l, events e
          where d.id = l.id and l.n <= l.room and e.id = d.event_id and not ${endpointDisabled('d')}
          returning ${CLAIMED}
        ),
        moved as (
          update deliveries d
          set next_attempt_at = to_timestamp((l.from_ms + l.step_ms * (l.n - l.room - 1)) / 1000.0)
          from locked l
          where d.id = l.id and l.n > l.room and not ${endpointDisabled('d')}
          returning d.id, null::uuid as token, d.event_id, d.url, d.attempts, d.first_attempt_at,
            null::text as payload, null::text as business_id, null::text as mode,
            null::timestamptz as event_created_at, d.endpoint_id, d.next_attempt_at as paced_to
        )
        select * from claimed union all select * from moved`.execute(db);
  const claims: Claim[] = [];
  const moved = new Map<string, { rows: number; until: Date }>();
  for (const { paced_to, ...row } of result.rows) {
    if (paced_to === null) claims.push(row);
    else {
      const last = moved.get(row.url);
      const until = new Date(paced_to);
      if (!last) moved.set(row.url, { rows: 1, until });
      else {
        last.rows++;
        if (until > last.until) last.until = until;
      }
    }
  }
  return { claims, paced: moved };
}

/**
 * Whether a row of a URL not in `urls` is due at `now` (and, with `share`, one this instance may
 * claim): the walk of the due index that a claim would make past the backlogs of `urls`, stopped at
 * the first such row. The worker asks it before it paces those backlogs (docs/decisions.md, "One
 * URL's backlog"), at most once a wake-up.
 *
 * @example
 * ```ts
 * const waiting = await database.delivery((db) => otherUrlsDue(db, { now: new Date(), urls: [url] }));
 * ```
 */
export async function otherUrlsDue(
  db: Kysely<Schema> | Transaction<Schema>,
  { now, urls, share }: { now: Date; urls: readonly string[]; share?: ClaimOptions['share'] },
): Promise<boolean> {
  const { rows } = await sql<{ id: string }>`${sql.raw(PREPARE)}
    select id from deliveries
    where ${dueFilter(now, share)} and url <> all(${urls}::text[])
    order by next_attempt_at
    limit 1`.execute(db);
  return rows.length > 0;
}
