import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import { type Database, PREPARE } from '../db/database.js';
import type { Resolver } from '../net/webhook-url.js';
import { type Claim, claimDeliveries } from './claim.js';
import { type AttemptOutcome, createDeliveryClient, type DeliveryClient } from './http-client.js';
import type { DeliveryMetrics } from './metrics.js';
import { WAKE_CHANNEL } from './outbox.js';
import { createAttemptRecorder } from './records.js';

/** The few logger methods the worker uses (pino's, Fastify's `app.log`). */
export interface WorkerLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** Options of {@link createDeliveryWorker}. */
export interface DeliveryWorkerOptions {
  database: Database;
  /** Sends the attempts (default: {@link createDeliveryClient} with `resolve` and `allowPrivate`). */
  client?: DeliveryClient;
  /** Resolves webhook host names, for the default client (injectable for tests). */
  resolve?: Resolver;
  /** Development switch: deliver to private addresses too (the default client's option). */
  allowPrivate?: boolean;
  /** Attempts in flight at once, over every URL (default 32). */
  concurrency?: number;
  /** Attempts in flight at once to one URL, so one slow receiver cannot starve the others (default 4). */
  perUrlConcurrency?: number;
  /** How long a claim holds a delivery; past it another worker takes it over (default 60 s). */
  leaseMs?: number;
  /** How often to look for due retries when nothing wakes the worker (default 1 s). */
  pollIntervalMs?: number;
  /** How long `stop()` waits for attempts in flight before releasing them (default 10 s). */
  shutdownGraceMs?: number;
  /** The clock (injectable: a test runs 48 hours in milliseconds). */
  now?: () => Date;
  /** The random source of the retry jitter, in [0, 1). */
  random?: () => number;
  metrics?: DeliveryMetrics;
  logger?: WorkerLogger;
}

/** The delivery worker of one sender instance. */
export interface DeliveryWorker {
  /** Listens for new events and polls for due retries until `stop()`. */
  start(): Promise<void>;
  /** Looks for due deliveries now (new events wake it by themselves). */
  wake(): void;
  /**
   * Claims and attempts every delivery due now, and waits until none is due and none is in flight.
   * Returns the number of attempts made. For tests and tools that drive the clock themselves.
   */
  runDue(): Promise<number>;
  /** Stops claiming, lets attempts in flight finish within the grace period, releases the rest. */
  stop(): Promise<void>;
}

const silent: WorkerLogger = { info() {}, warn() {}, error() {} };

function positive(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 1) {
    throw new TypeError(`Invalid ${name}: ${value} (a positive integer).`);
  }
  return value;
}

/**
 * Creates the worker that delivers the outbox: it claims due deliveries with `FOR UPDATE SKIP
 * LOCKED` under a lease (so several instances on one PostgreSQL share the work, and a killed
 * worker's claims come back when the lease ends), posts each event's signed bytes to its URL,
 * records every attempt, and schedules the retries of DESIGN.md until 48 hours after the first
 * attempt. New events wake it at once (NOTIFY on commit); retries are found by polling.
 *
 * @example
 * ```ts
 * const worker = createDeliveryWorker({ database, logger: app.log });
 * await worker.start();
 * process.on('SIGTERM', () => worker.stop());
 * ```
 */
export function createDeliveryWorker(options: DeliveryWorkerOptions): DeliveryWorker {
  const { database, metrics } = options;
  const concurrency = positive('concurrency', options.concurrency, 32);
  const perUrl = positive('perUrlConcurrency', options.perUrlConcurrency, 4);
  const leaseMs = positive('leaseMs', options.leaseMs, 60_000);
  const pollIntervalMs = positive('pollIntervalMs', options.pollIntervalMs, 1000);
  const graceMs = options.shutdownGraceMs ?? 10_000;
  const now = options.now ?? (() => new Date());
  const random = options.random ?? Math.random;
  const log = options.logger ?? silent;
  const ownClient = options.client === undefined;
  const client =
    options.client ?? createDeliveryClient({ resolve: options.resolve, allowPrivate: options.allowPrivate });
  const record = createAttemptRecorder({ database, now, random, logger: log });

  /**
   * Claims held by this worker: waiting in `ready`, being sent, or sent and being recorded
   * (`claimedAt` on the worker's clock; `done` is set once the attempt begins).
   */
  const inFlight = new Map<string, { claim: Claim; claimedAt: number; done?: Promise<void> }>();
  /**
   * Claimed ahead, waiting for a slot, in due order. A claim is a round trip to the database: were
   * slots filled only as they free up, each claim would serve a handful of attempts and the
   * attempts would wait on it. Up to three times `concurrency` rows (and three times the per-URL
   * limit for one URL) are held ready instead, so a freed slot starts its next attempt at once,
   * and a claim is made when a quarter of that capacity is free, so that each claim serves many
   * attempts.
   */
  let ready: Claim[] = [];
  /** Attempts being sent: what `concurrency` limits. */
  let sending = 0;
  /** Attempts started since the worker was made. */
  let begun = 0;
  /** Attempts started and not yet done: being sent, or sent and being recorded. */
  let active = 0;
  /** Attempts being sent, per URL: what `perUrlConcurrency` limits. */
  const perUrlCount = new Map<string, number>();
  /** Rows held per URL, being sent or ready: at most four times the per-URL limit. */
  const perUrlHeld = new Map<string, number>();
  /**
   * URLs a claim gave all the rows they had room for: their backlog is likely longer than what
   * they may hold. Their freed slots wait for room for a batch (see `freeSlot`).
   */
  const capped = new Set<string>();
  const capacity = 4 * concurrency;
  const refill = concurrency;
  const urlCapacity = 4 * perUrl;
  let stopping = false;
  let timer: NodeJS.Timeout | undefined;
  let renewal: NodeJS.Timeout | undefined;
  let unlisten: (() => Promise<void>) | undefined;
  let pumping: Promise<number> | undefined;
  let again = false;
  /**
   * Rows the last claim brought, when fewer than it asked for: the due rows it could take are
   * fewer than the room (the URLs that have them are near their limit, or little is due), so the
   * next claim asks for twice that, at least `refill`, rather than reading the whole room's worth
   * of due rows to keep a few.
   */
  let lastShort: number | undefined;
  /** Resolved when the next attempt in flight is done (what `runDue` waits on), made on demand. */
  let settled: { promise: Promise<void>; resolve: () => void } | undefined;

  /** A promise of the next attempt's end: one for all waiters, however many attempts run. */
  function nextSettled(): Promise<void> {
    if (settled === undefined) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => {
        resolve = r;
      });
      settled = { promise, resolve };
    }
    return settled.promise;
  }

  /**
   * Claims up to `limit` due deliveries: for each URL no more than the room it has left (rows held
   * up to four times the per-URL limit), skipping URLs that hold all they may and the deliveries
   * this worker has held for half a lease or more: their leases are renewed, but a row whose
   * renewal is late must not be sent twice from here. A row claimed more recently cannot be due
   * (its lease ends a full lease after its claim, or later), and naming every row held in every
   * claim cost the database a comparison with each of them for every row it walked.
   */
  function claim(limit: number): Promise<{ claims: Claim[]; rooms: Map<string, number> }> {
    const at = now();
    const skipIds: string[] = [];
    for (const [id, held] of inFlight) if (held.claimedAt <= at.getTime() - leaseMs / 2) skipIds.push(id);
    const rooms = new Map<string, number>();
    const skipUrls: string[] = [];
    for (const [url, held] of perUrlHeld) {
      if (held >= urlCapacity) skipUrls.push(url);
      else rooms.set(url, urlCapacity - held);
    }
    return database
      .delivery((db) =>
        claimDeliveries(db, {
          now: at,
          leaseMs,
          limit,
          skipUrls,
          skipIds,
          maxPerUrl: urlCapacity,
          urlLimits: rooms,
        }),
      )
      .then((claims) => ({ claims, rooms }));
  }

  const count = (map: Map<string, number>, url: string, by: number) => {
    const n = (map.get(url) ?? 0) + by;
    if (n === 0) map.delete(url);
    else map.set(url, n);
  };

  /**
   * Sets the due time of the deliveries these claims still hold: found by their keys (the primary
   * key's index), changed only where the claim's token still matches.
   */
  function setDue(claims: readonly Claim[], due: Date, release: boolean): Promise<unknown> {
    return database.delivery((db) =>
      sql`${sql.raw(PREPARE)}
        update deliveries
        set next_attempt_at = ${due}, claim_token = case when ${release} then null else claim_token end
        where id = any(${claims.map((c) => c.id)}::uuid[])
          and claim_token = any(${claims.map((c) => c.token)}::uuid[]) and status = 'pending'`.execute(db),
    );
  }

  /** Gives claims back at once (a URL over its limit, or a shutdown): due again, unclaimed. */
  async function release(claims: readonly Claim[]): Promise<void> {
    if (claims.length > 0) await setDue(claims, now(), true);
  }

  /**
   * Extends the leases of the attempts in flight, every third of a lease, so that no other
   * instance takes over a delivery that is still being attempted.
   */
  async function renew(): Promise<void> {
    const claims = [...inFlight.values()].map((f) => f.claim);
    if (claims.length > 0) await setDue(claims, new Date(now().getTime() + leaseMs), false);
  }

  function renewWhileBusy(): void {
    if (renewal || stopping) return;
    renewal = setInterval(
      () => {
        if (inFlight.size === 0) {
          clearInterval(renewal);
          renewal = undefined;
          return;
        }
        renew().catch((error: unknown) => log.error({ err: error }, 'renewing delivery leases failed'));
      },
      Math.max(1, Math.floor(leaseMs / 3)),
    );
    renewal.unref();
  }

  /** Sends one attempt; resolves with its outcome once the response is read (before it is recorded). */
  async function send(claim: Claim): Promise<{ startedAt: Date; outcome: AttemptOutcome }> {
    const startedAt = now();
    const t0 = performance.now();
    const outcome = await client.send({
      url: claim.url,
      body: claim.payload,
      // For the receiver's logs only: not signed, never trusted for security (DESIGN.md).
      headers: {
        'payhook-event-id': claim.event_id,
        'payhook-delivery-id': claim.id,
        'payhook-attempt': String(claim.attempts + 1),
      },
    });
    const label = outcome.ok ? 'delivered' : (outcome.error?.code ?? 'failed');
    metrics?.attempts.inc({ outcome: label });
    metrics?.attemptDuration.observe({ outcome: label }, (performance.now() - t0) / 1000);
    return { startedAt, outcome };
  }

  /** Frees a slot once an attempt's response is in: recording it needs no connection to the URL. */
  function freeSlot(claim: Claim): void {
    sending--;
    count(perUrlCount, claim.url, -1);
    count(perUrlHeld, claim.url, -1);
    const held = perUrlHeld.get(claim.url) ?? 0;
    if (held === 0) capped.delete(claim.url);
    if (stopping) return;
    startReady();
    // More work may be due, for this URL or another. Claims wait for some room, so that one
    // claim serves several attempts rather than one each. A URL with a backlog longer than it
    // may hold waits until it holds half that: a claim at each of its freed slots would read a
    // full batch of due rows to keep one.
    const batching = capped.has(claim.url) && held > urlCapacity / 2;
    if (sending + ready.length === 0 || (!batching && capacity - sending - ready.length >= refill)) wake();
  }

  /**
   * Starts ready rows while slots are free, in due order, skipping URLs at their limit. Stops at
   * the first row it cannot start for want of a slot: a freed slot costs a step or a few, not a
   * pass over every row held ready.
   */
  function startReady(): number {
    let started = 0;
    for (let i = 0; i < ready.length && sending < concurrency; ) {
      const c = ready[i] as Claim;
      if ((perUrlCount.get(c.url) ?? 0) < perUrl) {
        ready.splice(i, 1);
        begin(c);
        started++;
      } else i++;
    }
    return started;
  }

  function begin(claim: Claim): void {
    begun++;
    active++;
    sending++;
    count(perUrlCount, claim.url, 1);
    let freed = false;
    const done = send(claim)
      .then(({ startedAt, outcome }) => {
        freed = true;
        freeSlot(claim);
        // The claim stays in flight (its lease renewed, never claimed again here) until recorded.
        return record(claim, startedAt, outcome);
      })
      .catch((error: unknown) =>
        log.error({ err: error, delivery: claim.id }, 'recording a delivery attempt failed'),
      )
      .finally(() => {
        if (!freed) freeSlot(claim);
        inFlight.delete(claim.id);
        active--;
        if (settled !== undefined) {
          const { resolve } = settled;
          settled = undefined;
          resolve();
        }
      });
    const held = inFlight.get(claim.id);
    if (held) held.done = done;
    else inFlight.set(claim.id, { claim, claimedAt: now().getTime(), done });
  }

  /**
   * Fills the free slots, from the ready rows first, then with due deliveries claimed ahead up to
   * the worker's capacity. Returns how many attempts it started.
   */
  async function fill(): Promise<number> {
    let started = startReady();
    while (!stopping) {
      const room = capacity - sending - ready.length;
      if (room <= 0 || (room < refill && sending + ready.length > 0)) break;
      const limit = lastShort === undefined ? room : Math.min(room, Math.max(refill, 2 * lastShort));
      const claimedAt = now().getTime();
      const { claims, rooms } = await claim(limit);
      lastShort = claims.length < limit ? claims.length : undefined;
      const over: Claim[] = [];
      const taken = new Map<string, number>();
      for (const c of claims) {
        // The claim kept within each URL's room (rooms only grow while it runs); rows claimed
        // while stopping go back at once.
        if ((perUrlHeld.get(c.url) ?? 0) >= urlCapacity || stopping) over.push(c);
        else {
          count(perUrlHeld, c.url, 1);
          count(taken, c.url, 1);
          inFlight.set(c.id, { claim: c, claimedAt });
          ready.push(c);
        }
      }
      for (const [url, n] of taken) {
        if (n >= (rooms.get(url) ?? urlCapacity)) capped.add(url);
        else capped.delete(url);
      }
      renewWhileBusy();
      started += startReady();
      await release(over);
      if (claims.length < limit) break;
    }
    return started;
  }

  /** One pass at a time; a wake-up during a pass runs another after it. */
  function pump(): Promise<number> {
    if (pumping) {
      again = true;
      return pumping;
    }
    pumping = (async () => {
      let started = 0;
      do {
        again = false;
        started += await fill();
      } while (again && !stopping);
      return started;
    })().finally(() => {
      pumping = undefined;
    });
    return pumping;
  }

  function wake(): void {
    if (stopping) return;
    pump().catch((error: unknown) => log.error({ err: error }, 'claiming deliveries failed'));
  }

  return {
    async start() {
      unlisten = await database.listen(WAKE_CHANNEL, wake);
      timer = setInterval(wake, pollIntervalMs);
      timer.unref();
      wake();
    },
    wake,
    async runDue() {
      // Counted at the start of each attempt: wake-ups start some too, not only this loop.
      const before = begun;
      for (;;) {
        if (stopping) return begun - before;
        await pump();
        if (inFlight.size === 0) {
          // Nothing running: one more look, in case a pass ended as the last attempt finished.
          await pump();
          if (inFlight.size === 0) return begun - before;
        }
        // Rows held ready wait for a slot that an attempt in flight frees. One shared promise, not
        // a race over every attempt in flight: that would add a reaction to each of them per turn.
        if (active > 0) await nextSettled();
      }
    },
    async stop() {
      stopping = true;
      clearInterval(timer);
      clearInterval(renewal);
      await unlisten?.().catch(() => {});
      await pumping?.catch(() => {});
      // Rows claimed ahead and never begun go back at once.
      const unstarted = ready;
      ready = [];
      for (const c of unstarted) inFlight.delete(c.id);
      await release(unstarted).catch((error: unknown) =>
        log.error({ err: error }, 'releasing unstarted deliveries failed'),
      );
      const running = [...inFlight.values()];
      if (running.length > 0) {
        let grace: NodeJS.Timeout | undefined;
        await Promise.race([
          Promise.allSettled(running.map((f) => f.done)),
          new Promise((resolve) => {
            grace = setTimeout(resolve, graceMs);
          }),
        ]);
        clearTimeout(grace);
      }
      const left = [...inFlight.values()].map((f) => f.claim);
      if (left.length > 0) {
        await release(left);
        log.warn({ released: left.length }, 'released deliveries still in flight at shutdown');
      }
      // Released attempts are abandoned: their connections are cut rather than waited for.
      if (ownClient) await (left.length > 0 ? client.destroy() : client.close());
    },
  };
}
