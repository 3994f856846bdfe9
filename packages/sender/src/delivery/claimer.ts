import { randomBytes } from 'node:crypto';
import type { Database } from '../db/database.js';
import { type Claim, claimDeliveries, otherUrlsDue, releaseOrphanedClaims } from './delivery-state.js';
import type { HeldClaims } from './held-claims.js';
import type { UrlShare } from './membership.js';
import { traceClaim } from './tracing.js';

/** Claims in a row, per pass, that may read nothing but backlogs to pace (see the worker's `fill`). */
export const PACING_CLAIMS = 8;
/** The most rows one pacing claim reads. */
export const PACING_LIMIT = 1024;

/** What the worker's claims need of it. */
export interface ClaimerOptions {
  database: Database;
  held: HeldClaims;
  leaseMs: number;
  /** The per-URL limit of every instance (`perUrlConcurrency`). */
  perUrl: number;
  /** This instance's share of the URLs, once it has joined the others. */
  share: () => UrlShare | undefined;
  /** Eight hex digits that begin this worker's claim tokens (default: random, per claimer). */
  owner?: string;
}

/** A claim's filter, from `HeldClaims.claimFilter`. */
export type ClaimFilter = ReturnType<HeldClaims['claimFilter']>;

/** What a claim brought. */
export interface Claimed {
  claims: Claim[];
  /** The rooms it kept within (`HeldClaims.hold` takes them). */
  rooms: Map<string, number>;
  /**
   * Whether every row it read was a paced URL's (taken within its room, or moved): rows of other
   * URLs may be due behind them, and the next claim should read further.
   */
  pacedAll: boolean;
}

/**
 * The delivery worker's claims: {@link claimDeliveries} within each URL's room, pacing the
 * backlogs the filter names, and the look past those backlogs that decides whether pacing them is
 * worth it (docs/decisions.md, "One URL's backlog").
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
  const shareOf = () => {
    const share = options.share();
    return share && { ...share, perUrl };
  };
  return {
    /** Whether the next claim reads past backlogs (see `lookAgain`). */
    get lookingPast(): boolean {
      return lookPast;
    },

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
     * The filter of the next claim at `at`. When it would look past backlogs (and `pace`, and not
     * `further` in a cascade that found other rows already), it first asks whether any other URL's
     * row is due ({@link otherUrlsDue}): pacing is worth its writes only then. One walk of the due
     * index, stopped at the first such row, once a wake-up rather than at every claim.
     */
    async filter(at: Date, pace: boolean, further: boolean): Promise<ClaimFilter> {
      const filter = held.claimFilter(at.getTime(), leaseMs, lookPast);
      if (!pace || !lookPast || further || filter.paced.length === 0) return filter;
      const urls = filter.paced.map((p) => p.url);
      const share = shareOf();
      if (await database.delivery((db) => otherUrlsDue(db, { now: at, urls, share }))) return filter;
      lookPast = false;
      return held.claimFilter(at.getTime(), leaseMs, false);
    },

    /**
     * Claims from the first `limit` due deliveries, within what each URL has room for (`filter`).
     * When `pace`, the due rows it reads of the URLs the filter paces are moved to their turn past
     * those URLs' rooms; otherwise (`runDue` promises every row due now) they stay due, and those
     * URLs take only their room.
     */
    async claim(limit: number, at: Date, filter: ClaimFilter, pace: boolean): Promise<Claimed> {
      const { skipIds, rooms } = filter;
      const paced = pace ? filter.paced : [];
      if (!pace) for (const { url } of filter.paced) if (!rooms.has(url)) rooms.set(url, 0);
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
      held.pacedUntil(paced, result.paced);
      let read = 0;
      for (const { rows } of result.paced.values()) read += rows;
      if (read > 0) {
        const urls = new Set(paced.map((p) => p.url));
        for (const c of result.claims) read += urls.has(c.url) ? 1 : limit;
      }
      lookPast = read >= limit;
      return { claims: result.claims, rooms, pacedAll: lookPast };
    },
  };
}
