import { performance } from 'node:perf_hooks';
import type { Claim, PacedUrl } from './delivery-state.js';
import { HELD_PER_SLOT, PACE_HORIZON_MS, PACE_WEIGHT, PACES_KEPT, URL_HELD_SHARE } from './tuning.js';

/** A claim the worker holds: waiting in `ready`, being sent, or sent and being recorded. */
interface Held {
  claim: Claim;
  /** When it was claimed, on the worker's clock. */
  claimedAt: number;
  /** Set once its attempt begins: resolves when the attempt is sent and recorded. */
  done?: Promise<void>;
  /**
   * When its request went out, on the latency clock: after its rate limit's send time and its signature,
   * which wait on the database, so that a URL's pace is its answers' alone.
   */
  sentAt?: number;
}

/** The limits of {@link HeldClaims}, and the worker's clock. */
export interface HeldClaimsOptions {
  /** Attempts being sent at once, over every URL. */
  concurrency: number;
  /**
   * Attempts sent at once to a URL not yet answered (the start of its concurrency): it sizes the
   * rows held for a URL until its pace is known.
   */
  perUrl: number;
  /**
   * A URL's concurrency over every instance, as it is now (default `perUrl`): the step between the
   * turns of its paced rows.
   */
  urlLimit?: (url: string) => number;
  /**
   * This instance's part of a URL's `perUrl` (its slots: all of them while alone, fewer or none
   * while other instances share the URL). It limits the attempts sent; a URL with any slot may
   * hold as many rows as when alone, so that claims stay as batched.
   */
  slots?: (url: string) => number;
  now: () => Date;
  /** The clock of the attempts' latency, in milliseconds (default `performance.now`). */
  clock?: () => number;
  /** Starts the attempt of a claim taken from `ready`. */
  begin: (claim: Claim) => void;
}

const count = (map: Map<string, number>, url: string, by: number) => {
  const n = (map.get(url) ?? 0) + by;
  if (n === 0) map.delete(url);
  else map.set(url, n);
};

/**
 * What one delivery worker holds: its claims, the rows claimed ahead, the counts its limits
 * apply to, and what it learns of each URL from what it holds (its room, its pace measured from
 * its attempts, the turn after its last paced row), so that the worker's loop only decides when
 * to claim, start and release. The decisions of a pass of claims (how many rows, whether to look
 * past backlogs, whether to read on) are the claimer's (`claimer.ts`).
 *
 * A claim is a round trip to the database: were slots filled only as they free up, each claim
 * would serve a handful of attempts and the attempts would wait on it. Up to four times
 * `concurrency` rows (and four times the per-URL limit for one URL) are held instead, so a freed
 * slot starts its next attempt at once, and a claim is made when a quarter of that capacity is
 * free, so that each claim serves many attempts.
 */
export class HeldClaims {
  /** Rows held at most: being sent, being recorded or ready. */
  readonly capacity: number;
  /** The free room, at least, that a claim waits for while attempts run. */
  readonly refill: number;
  /**
   * Rows held at most for one URL, being sent or ready, until its pace is known: 4 per slot. A URL
   * whose answers are fast may hold more (see {@link capacityOf}).
   */
  readonly urlCapacity: number;
  /** Rows held at most for one URL, however fast: three quarters of the worker's capacity. */
  readonly urlCapacityMax: number;
  /** Claims held, by delivery id: ready, being sent, or sent and being recorded. */
  private readonly inFlight = new Map<string, Held>();
  /** Claimed ahead, waiting for a slot, in due order. */
  private ready: Claim[] = [];
  /** Attempts being sent: what `concurrency` limits. */
  private sending = 0;
  /** Attempts started since the worker was made. */
  private begun = 0;
  /** Attempts started and not yet done: being sent, or sent and being recorded. */
  private active = 0;
  /** Attempts being sent, per URL: what `perUrlConcurrency` limits. */
  private readonly perUrlCount = new Map<string, number>();
  /** Rows held per URL, being sent or ready: at most its `capacityOf` when claimed. */
  private readonly perUrlHeld = new Map<string, number>();
  /**
   * URLs a claim gave all the rows they had room for: their backlog is likely longer than what
   * they may hold. Their freed slots wait for room for a batch (see {@link batching}).
   */
  private readonly capped = new Set<string>();

  /** Claims held: ready, being sent, or sent and being recorded. */
  get heldCount(): number {
    return this.inFlight.size;
  }
  /** Attempts started since the worker was made (what `runDue` counts). */
  get begunCount(): number {
    return this.begun;
  }
  /** Attempts begun and not yet done: being sent, or sent and being recorded. */
  get activeCount(): number {
    return this.active;
  }
  /** Attempts being sent now (`readyCount`: rows claimed ahead, waiting for a slot). */
  get sendingCount(): number {
    return this.sending;
  }
  get readyCount(): number {
    return this.ready.length;
  }

  /**
   * The rows the next claim may bring (its capacity less the rows being sent and ready), once at
   * least `refill` so that one claim serves several attempts, or any while nothing is; else 0.
   */
  roomToClaim(): number {
    const busy = this.sending + this.ready.length;
    const room = this.capacity - busy;
    return room >= this.refill || (busy === 0 && room > 0) ? room : 0;
  }

  /** The ends of the attempts begun and not yet done (what a shutdown waits for, within its grace). */
  attemptsRunning(): Promise<void>[] {
    const running: Promise<void>[] = [];
    for (const held of this.inFlight.values()) if (held.done) running.push(held.done);
    return running;
  }

  /** Whether some URL's last claim filled its room: more of its rows may be due. */
  get anyCapped(): boolean {
    return this.capped.size > 0;
  }
  /**
   * Each URL's time per attempt (ms, a moving average), kept for the last {@link PACES_KEPT} URLs
   * sent to, so that a URL whose held rows run out between two claims keeps its pace.
   */
  private readonly pace = new Map<string, number>();
  /** Per paced URL: the turn (ms) after the last row a claim paced, while it holds rows. */
  private readonly tails = new Map<string, number>();
  private readonly clock: () => number;
  /** Resolved when the next attempt is done (what `runDue` waits on), made on demand. */
  private settled: { promise: Promise<void>; resolve: () => void } | undefined;

  constructor(private readonly options: HeldClaimsOptions) {
    this.capacity = HELD_PER_SLOT * options.concurrency;
    this.refill = options.concurrency;
    this.urlCapacity = HELD_PER_SLOT * options.perUrl;
    this.urlCapacityMax = Math.max(this.urlCapacity, Math.floor(URL_HELD_SHARE * this.capacity));
    this.clock = options.clock ?? (() => performance.now());
  }

  /** Attempts this instance may send at once to `url`. */
  private limitOf(url: string): number {
    return this.options.slots ? this.options.slots(url) : this.options.perUrl;
  }

  /**
   * Rows this instance may hold for `url`, being sent or ready: none without a slot; 4 per slot of
   * the URL's limit until its pace is known; then what its slots send in twice {@link PACE_HORIZON_MS},
   * within `urlCapacityMax`. A fast URL with a long backlog is then claimed in batches as large as
   * many URLs' are, and its slots never wait for a claim; a slow one holds no more than before, so
   * its rows never keep the worker's room from the others (docs/decisions.md, "One URL's backlog").
   */
  capacityOf(url: string): number {
    const slots = this.limitOf(url);
    if (slots <= 0) return 0;
    const pace = this.pace.get(url);
    if (pace === undefined) return this.urlCapacity;
    const ahead = Math.ceil((2 * PACE_HORIZON_MS * slots) / Math.max(pace, 0.01));
    return Math.min(this.urlCapacityMax, Math.max(this.urlCapacity, ahead));
  }

  /**
   * What the next claim leaves alone: the deliveries held for half a lease or more (their leases
   * are renewed, but a row whose renewal is late must not be sent twice from here; a row claimed
   * more recently cannot be due, as its lease ends a full lease after its claim, and naming every
   * row held cost the database a comparison with each for every row it walked); the room each URL
   * has left; and the URLs to pace (`PacedUrl`): the claim moves their due rows past their room to
   * their turn at the URL's pace, so that their backlog is not read again by each claim. Those are
   * the URLs that hold all they may and, when `lookPast` (the claimer's word that other URLs' rows
   * may be due behind them), the URLs whose last claim filled their room: their backlog is longer
   * than they hold.
   */
  claimFilter(
    at: number,
    leaseMs: number,
    lookPast = false,
  ): { skipIds: string[]; paced: PacedUrl[]; rooms: Map<string, number> } {
    const skipIds: string[] = [];
    const oldestSent = new Map<string, number>();
    for (const [id, held] of this.inFlight) {
      if (held.claimedAt <= at - leaseMs / 2) skipIds.push(id);
      const { sentAt } = held;
      const oldest = oldestSent.get(held.claim.url);
      if (sentAt !== undefined && (oldest === undefined || sentAt < oldest))
        oldestSent.set(held.claim.url, sentAt);
    }
    const rooms = new Map<string, number>();
    const paced: PacedUrl[] = [];
    for (const [url, held] of this.perUrlHeld) {
      const room = Math.max(0, this.capacityOf(url) - held);
      if (room > 0) {
        rooms.set(url, room);
        if (!lookPast || !this.capped.has(url)) continue;
      }
      const slots = this.limitOf(url);
      if (slots <= 0) continue;
      // Until an answer is in, its pace is at least the age of its oldest attempt.
      const sent = oldestSent.get(url);
      const pace = Math.max(this.pace.get(url) ?? (sent === undefined ? 0 : this.clock() - sent), 1);
      // Its turn comes once the rows it holds, and those the claim gives it, are sent.
      const turn = at + ((held + room) * pace) / slots;
      paced.push({
        url,
        from: new Date(Math.max(turn, this.tails.get(url) ?? 0)),
        stepMs: pace / (this.options.urlLimit?.(url) ?? this.options.perUrl),
        room,
      });
    }
    return { skipIds, paced, rooms };
  }

  /**
   * Keeps, per URL, the turn after the last row a claim paced (`moved`, from the claim's result):
   * the next claim paces that URL's rows from there.
   */
  pacedUntil(asked: readonly PacedUrl[], moved: ReadonlyMap<string, { until: Date }>): void {
    for (const { url, stepMs } of asked) {
      const until = moved.get(url)?.until;
      if (until !== undefined && this.perUrlHeld.has(url)) this.tails.set(url, until.getTime() + stepMs);
    }
  }

  /**
   * Holds what a claim brought, ready in due order; returns the rows to give back: those past
   * their URL's room, or all of them when `refuse` (the worker is stopping).
   */
  hold(
    claims: readonly Claim[],
    rooms: ReadonlyMap<string, number>,
    claimedAt: number,
    refuse: boolean,
  ): Claim[] {
    const over: Claim[] = [];
    const taken = new Map<string, number>();
    for (const c of claims) {
      // The claim kept within the room each URL had when it began (its rows held only went down
      // since, though its capacity may have too, with its pace: the rows are kept all the same,
      // rather than given back and claimed again). A URL whose slots here went to other instances
      // takes none, and rows claimed while stopping go back at once.
      const room = rooms.get(c.url) ?? this.urlCapacity;
      if (refuse || (taken.get(c.url) ?? 0) >= room || this.limitOf(c.url) <= 0) over.push(c);
      else {
        count(this.perUrlHeld, c.url, 1);
        count(taken, c.url, 1);
        this.inFlight.set(c.id, { claim: c, claimedAt });
        this.ready.push(c);
      }
    }
    for (const [url, n] of taken) {
      if (n >= (rooms.get(url) ?? this.urlCapacity)) this.capped.add(url);
      else this.capped.delete(url);
    }
    return over;
  }

  /**
   * Starts ready rows while slots are free, in due order, skipping URLs at their limit. Stops at
   * the first row it cannot start for want of a slot: a freed slot costs a step or a few, not a
   * pass over every row held ready.
   */
  startReady(): number {
    const { ready } = this;
    const { concurrency, begin } = this.options;
    let started = 0;
    for (let i = 0; i < ready.length && this.sending < concurrency; ) {
      const c = ready[i] as Claim;
      if ((this.perUrlCount.get(c.url) ?? 0) < this.limitOf(c.url)) {
        ready.splice(i, 1);
        begin(c);
        started++;
      } else i++;
    }
    return started;
  }

  /** Counts an attempt that begins, and keeps `done`, the promise of its end, with its claim. */
  began(claim: Claim, done: Promise<void>): void {
    const held = this.inFlight.get(claim.id);
    if (held) held.done = done;
    else this.inFlight.set(claim.id, { claim, claimedAt: this.options.now().getTime(), done });
  }

  /**
   * Whether `url` wants more room than its slots give: every slot in use, or rows held ready for
   * it (asked as an answer comes in, before its slot is freed).
   */
  saturated(url: string): boolean {
    const sending = this.perUrlCount.get(url) ?? 0;
    return sending >= this.limitOf(url) || (this.perUrlHeld.get(url) ?? 0) > sending;
  }

  /** Counts a slot taken by an attempt about to be sent. */
  slotTaken(claim: Claim): void {
    this.begun++;
    this.active++;
    this.sending++;
    count(this.perUrlCount, claim.url, 1);
  }

  /**
   * Notes that an attempt's request goes out now: its URL's pace counts from here. A database that
   * is slow to reserve a rate limit's send time or to give a signing secret (an outage) is not the URL's pace: a
   * pace taken from the slot would move the URL's rows seconds ahead at the next claim.
   */
  requestStarted(claim: Claim): void {
    const held = this.inFlight.get(claim.id);
    if (held) held.sentAt = this.clock();
  }

  /** Frees an attempt's slot once its response is in; returns the rows its URL still holds. */
  free(claim: Claim): number {
    this.sending--;
    count(this.perUrlCount, claim.url, -1);
    count(this.perUrlHeld, claim.url, -1);
    const held = this.perUrlHeld.get(claim.url) ?? 0;
    const sentAt = this.inFlight.get(claim.id)?.sentAt;
    if (held === 0) this.forget(claim.url);
    if (sentAt !== undefined) {
      const took = this.clock() - sentAt;
      const pace = this.pace.get(claim.url);
      // Deleted and set again: the Map's order is then the order of use, oldest first.
      this.pace.delete(claim.url);
      this.pace.set(claim.url, pace === undefined ? took : pace + (took - pace) * PACE_WEIGHT);
      if (this.pace.size > PACES_KEPT) this.pace.delete(this.pace.keys().next().value as string);
    }
    return held;
  }

  /**
   * Whether a slot freed at `url`, which still holds `held` rows, waits for room for a batch: a
   * URL with a backlog longer than it may hold waits until it holds half that, as a claim at each
   * of its freed slots would read a full batch of due rows to keep one.
   */
  batching(url: string, held: number): boolean {
    return this.capped.has(url) && held > this.capacityOf(url) / 2;
  }

  /** Forgets what was known of a URL that holds no rows any more. */
  private forget(url: string): void {
    this.capped.delete(url);
    this.tails.delete(url);
  }

  /** Lets go of a claim whose attempt is done (recorded, or failed to be), and wakes `nextDone`. */
  finished(claim: Claim): void {
    this.inFlight.delete(claim.id);
    this.active--;
    if (this.settled !== undefined) {
      const { resolve } = this.settled;
      this.settled = undefined;
      resolve();
    }
  }

  /** A promise of the next attempt's end: one for all waiters, however many attempts run. */
  nextDone(): Promise<void> {
    if (this.settled === undefined) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => {
        resolve = r;
      });
      this.settled = { promise, resolve };
    }
    return this.settled.promise;
  }

  /** Lets go of the rows claimed ahead and never begun, and returns them (to release). */
  dropReady(): Claim[] {
    const unstarted = this.ready;
    this.ready = [];
    for (const c of unstarted) {
      this.inFlight.delete(c.id);
      // No longer held here: the URL's room comes back (the worker may go on claiming).
      count(this.perUrlHeld, c.url, -1);
      if (!this.perUrlHeld.has(c.url)) this.forget(c.url);
    }
    return unstarted;
  }

  /** Every claim held. */
  claims(): Claim[] {
    return [...this.inFlight.values()].map((f) => f.claim);
  }
}
