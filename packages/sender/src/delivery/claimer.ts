import { randomBytes } from 'node:crypto';
import type { Database } from '../db/database.js';
import { type Claim, claimDeliveries, otherUrlsDue, releaseOrphanedClaims } from './delivery-state.js';
import type { HeldClaims } from './held-claims.js';
import type { UrlShare } from './membership.js';
import { traceClaim } from './tracing.js';
import { PACING_CLAIMS, PACING_LIMIT } from './tuning.js';

/** What the worker's claims need of it. */
export interface ClaimerOptions {
  database: Database;
  held: HeldClaims;
  leaseMs: number;
  /** The per-URL limit of every instance (`perUrlConcurrency`). */
  perUrl: number;
  /** This instance's share of the URLs, once it has joined the others. */
  share: () => UrlShare | undefined;
  /**
   * Whether claims pace backlogs now (move their due rows to their turn): while the worker runs,
   * not for `runDue`, which promises every row due now (asked at each claim).
   */
  pacing: () => boolean;
  /** Eight hex digits that begin this worker's claim tokens (default: random, per claimer). */
  owner?: string;
}

/** A claim's filter, from `HeldClaims.claimFilter`. */
type ClaimFilter = ReturnType<HeldClaims['claimFilter']>;

/** What one claim of a pass brought, and what the pass does next. */
export interface PassClaim {
  claims: Claim[];
  /** The rooms it kept within (`HeldClaims.hold` takes them). */
  rooms: Map<string, number>;
  /** Whether rows may still be due: it got all it asked for, or left some for room or pacing. */
  leftDue: boolean;
  /**
   * Whether the pass claims again, room permitting: every row it read was a paced backlog's (the
   * next claim reads further), or it got all it asked for.
   */
  readOn: boolean;
}

/** One pass of the worker's claims (see {@link createClaimer}'s `pass`). */
export interface ClaimPass {
  /**
   * The next claim of the pass at `at`, with `room` free in the worker; `undefined` when no claim
   * is worth making (every URL held is at its limit, and nothing may be due behind their backlogs).
   */
  next(room: number, at: Date): Promise<PassClaim | undefined>;
}

/**
 * The delivery worker's claims: {@link claimDeliveries} within each URL's room, pacing the
 * backlogs the filter names, and the decisions of a pass of claims: how many rows each claim
 * asks for, whether it looks past those backlogs (worth pacing them only when other URLs' rows
 * are due behind them), and whether the pass reads on (docs/decisions.md, "One URL's backlog").
 * `HeldClaims` keeps what is held, and each URL's room and pace.
 */
export function createClaimer(options: ClaimerOptions) {
  const { database, held, leaseMs, perUrl } = options;
  const owner = options.owner ?? randomBytes(4).toString('hex');
  /**
   * Whether the next claim should read past the backlogs of URLs with more rows than they may hold
   * (pacing them): set by what may have made other rows due (new events, the poll), and while
   * pacing reads nothing but backlogs.
   */
  let lookPast = true;
  /**
   * Rows the last claim brought, when fewer than it asked for: the due rows it could take are
   * fewer than the room (the URLs that have them are near their limit, or little is due), so the
   * next claim asks for twice that, at least `refill`, rather than reading the whole room's worth
   * of due rows to keep a few.
   */
  let lastShort: number | undefined;
  const shareOf = () => {
    const share = options.share();
    return share && { ...share, perUrl };
  };

  /**
   * How many rows the next claim asks for, with `free` room and `rooms` left for the URLs held:
   * after a short claim, twice what it brought, at least `refill`, and at least the URLs' rooms
   * and `refill` more, so that a URL with a backlog fills its room in one claim (a claim cut
   * short of it would leave the URL's room open, and each freed slot would claim again).
   */
  function claimLimit(free: number, rooms: ReadonlyMap<string, number>): number {
    // Nothing held: the first claim takes what starts every slot, and the pass reads on for the
    // rest while those are sent. A claim of the whole room first kept every slot idle until its
    // 4x as many rows were written (24 of the 35 ms before the first attempt, 128 rows).
    const room = held.sendingCount + held.readyCount === 0 ? Math.min(free, held.refill) : free;
    if (lastShort === undefined) return room;
    let known = 0;
    for (const n of rooms.values()) known += n;
    return Math.min(room, Math.max(held.refill, 2 * lastShort, known + held.refill));
  }

  /**
   * The filter of the next claim at `at`. When it would look past backlogs (and `pacing`, and not
   * `further` in a cascade that found other rows already), it first asks whether any other URL's
   * row is due ({@link otherUrlsDue}): pacing is worth its writes only then. One walk of the due
   * index, stopped at the first such row, once a wake-up rather than at every claim.
   */
  async function claimFilter(at: Date, pacing: boolean, further: boolean): Promise<ClaimFilter> {
    const filter = held.claimFilter(at.getTime(), leaseMs, lookPast);
    if (!pacing || !lookPast || further || filter.paced.length === 0) return filter;
    const urls = filter.paced.map((p) => p.url);
    const share = shareOf();
    if (await database.delivery((db) => otherUrlsDue(db, { now: at, urls, share }))) return filter;
    lookPast = false;
    return held.claimFilter(at.getTime(), leaseMs, false);
  }

  /**
   * Claims from the first `limit` due deliveries, within what each URL has room for (`filter`).
   * When `pacing`, the due rows it reads of the URLs the filter paces are moved to their turn past
   * those URLs' rooms; otherwise (`runDue` promises every row due now) they stay due, and those
   * URLs take only their room. Answers whether the next claim should read further
   * (`readFurther`): it moved paced rows and either read all it could (every row a paced URL's,
   * so other URLs' rows may be due behind them) or claimed rows of other URLs too (so other URLs
   * are due, and pacing is worth its writes).
   */
  async function claim(limit: number, at: Date, filter: ClaimFilter, pacing: boolean) {
    const { skipIds, rooms } = filter;
    const paced = pacing ? filter.paced : [];
    if (!pacing) for (const { url } of filter.paced) if (!rooms.has(url)) rooms.set(url, 0);
    const share = shareOf();
    const result = await traceClaim(
      limit,
      () =>
        database.delivery((db) =>
          claimDeliveries(db, {
            now: at,
            owner,
            leaseMs,
            limit,
            skipIds,
            maxPerUrl: held.urlCapacity,
            urlLimits: rooms,
            paced,
            share,
          }),
        ),
      (r) => r.claims,
      (r) => [...r.paced.values()].reduce((sum, p) => sum + p.rows, 0),
    );
    lastShort = result.claims.length < limit ? result.claims.length : undefined;
    held.pacedUntil(paced, result.paced);
    let read = 0;
    for (const { rows } of result.paced.values()) read += rows;
    if (read > 0) {
      const urls = new Set(paced.map((p) => p.url));
      for (const c of result.claims) read += urls.has(c.url) ? 1 : limit;
    }
    lookPast = read >= limit;
    return { claims: result.claims, rooms, readFurther: lookPast };
  }

  return {
    /**
     * Gives back the claims this worker made and does not hold (cut short by an outage, they
     * may have committed once the database answered again): due now rather than at lease end.
     */
    releaseOrphans(at: Date): Promise<number> {
      const tokens = held.claims().map((c) => c.token);
      return database.delivery((db) => releaseOrphanedClaims(db, { owner, held: tokens, now: at }));
    },

    /** Rows may have come due (new events, the poll): the next claim looks past backlogs. */
    lookAgain(): void {
      lookPast = true;
    },

    /**
     * Begins a pass of claims (the worker's `fill`). A claim that read nothing but paced backlogs
     * is followed at once by one reading twice as far (up to {@link PACING_LIMIT} rows), up to
     * {@link PACING_CLAIMS} in a row; otherwise the pass reads on while claims get all they ask.
     */
    pass(): ClaimPass {
      /** Claims of this pass that read nothing but rows of URLs at their limit, and paced them all. */
      let pacingOnly = 0;
      let pacingLimit = 0;
      return {
        async next(room, at) {
          const pacing = options.pacing();
          const found = await claimFilter(at, pacing, pacingOnly > 0);
          // Every URL held is at its limit: a claim could only pace their backlogs to find other
          // URLs' rows behind them. Worth it when other rows may be due (new events, the poll, or
          // the last claim paced all it read); a freed slot of a URL at its limit is no reason.
          if (found.rooms.size === 0 && found.paced.length > 0 && !lookPast) return undefined;
          const limit = pacingOnly > 0 ? pacingLimit : claimLimit(room, found.rooms);
          const { claims, rooms, readFurther } = await claim(limit, at, found, pacing);
          const leftDue = claims.length >= limit || found.paced.length > 0;
          if (readFurther && pacingOnly < PACING_CLAIMS) {
            // It paced backlogs and read all it could, or found other URLs' rows among them:
            // more of those may wait behind. Read on, further each time.
            pacingOnly++;
            pacingLimit = Math.min(PACING_LIMIT, 2 * limit);
            return { claims, rooms, leftDue, readOn: true };
          }
          // Fewer than asked for: the due rows it may take are all taken.
          if (claims.length < limit) return { claims, rooms, leftDue, readOn: false };
          pacingOnly = 0;
          return { claims, rooms, leftDue, readOn: true };
        },
      };
    },
  };
}
