import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { windowed } from '../db/wake.js';
import { createRateLimiter } from '../endpoints/rate-limit.js';
import { signingKeyring } from '../signing/keyring.js';
import { createAttemptRecorder } from './attempt-recorder.js';
import { createClaimer } from './claimer.js';
import { type Claim, releaseClaims, renewLeases, WAKE_CHANNEL } from './delivery-state.js';
import { HeldClaims } from './held-claims.js';
import { createDeliveryClient } from './http-client.js';
import { logFailure, silentLogger } from './logger.js';
import { measureLoopStalls } from './loop-stalls.js';
import { joinDeliveryInstances, type Membership, slotsHere } from './membership.js';
import { observeAttempt } from './metrics.js';
import { createOrphanSweeps } from './orphan-sweeps.js';
import { createRefusalHints, refusalHint } from './refusal-hint.js';
import { serialPasses } from './serial-passes.js';
import { beginAttemptSpan } from './tracing.js';
import { PGLITE_WAKE_WINDOW_MS } from './tuning.js';
import { UrlConcurrency } from './url-concurrency.js';
import {
  type DeliveryWorker,
  type DeliveryWorkerOptions,
  nextMode,
  positive,
  type SendResult,
  type WorkerMode,
} from './worker-options.js';

export type { WorkerLogger } from './logger.js';
export type { DeliveryWorker, DeliveryWorkerOptions } from './worker-options.js';

/**
 * Creates the worker that delivers the outbox: it claims due deliveries with `FOR UPDATE SKIP
 * LOCKED` under a lease (so several instances on one PostgreSQL share the work, and a killed
 * worker's claims come back when the lease ends), posts each event's signed bytes to its URL,
 * records every attempt, and schedules the retries (schedule.ts) until 48 hours after the first
 * attempt. New events wake it at once (after their commit: `db/wake.ts`); retries are found by
 * polling. The states of a delivery and the statement of each transition: `./delivery-state.ts`.
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
  const concurrency = positive('concurrency', options.concurrency, 64);
  const urlConcurrency = UrlConcurrency.from(options.perUrlConcurrency);
  /** This thread's lateness, taken out of the latency each URL's concurrency learns from. */
  const stalls = measureLoopStalls();
  /** Where each URL's concurrency starts: the share of a URL's slots among instances is of this. */
  const perUrl = urlConcurrency.bounds.initial;
  const leaseMs = positive('leaseMs', options.leaseMs, 60_000);
  const pollIntervalMs = positive('pollIntervalMs', options.pollIntervalMs, 1000);
  const graceMs = options.shutdownGraceMs ?? 10_000;
  const now = options.now ?? (() => new Date());
  const random = options.random ?? Math.random;
  const log = options.logger ?? silentLogger;
  const traceparent = options.traceparent ?? false;
  const ownClient = options.client === undefined;
  const client =
    options.client ?? createDeliveryClient({ resolve: options.resolve, allowPrivate: options.allowPrivate });
  const { feed } = options;
  const record = createAttemptRecorder({ database, now, random, logger: log, feed, retryForMs: leaseMs / 2 });
  const keyring = signingKeyring(database);
  const hintDue = createRefusalHints();
  const rateLimiter = createRateLimiter(database);

  let mode: WorkerMode = 'idle';
  /** True in `idle` and `running`: the worker claims, starts attempts and wakes itself. */
  let claiming = true;
  let poll: NodeJS.Timeout | undefined;
  let renewal: NodeJS.Timeout | undefined;
  let unlisten: (() => Promise<void>) | undefined;
  let stopWatchingHealth: (() => void) | undefined;
  /** Whether due rows may be left unclaimed (see `freeSlot`): false once a claim drained them. */
  let maybeDue = true;
  let stopped: Promise<void> | undefined;
  /** From `start()`: which URLs are this instance's (all of them until then, as for `runDue`). */
  let membership: Membership | undefined;
  /** Claims given back at shutdown with their attempts still running: those record nothing. */
  let abandoned: ReadonlySet<string> = new Set();

  const held = new HeldClaims({
    concurrency,
    perUrl,
    now,
    begin,
    slots: (url) => slotsHere(url, urlConcurrency.limit(url), perUrl, membership?.share()),
    urlLimit: (url) => urlConcurrency.limit(url),
  });
  const claimer = createClaimer({
    database,
    held,
    leaseMs,
    perUrl,
    share: () => membership?.share(),
    pacing: () => mode === 'running',
  });
  const pump = serialPasses(fill, () => !claiming);
  // On PGlite, whose one thread runs every statement, new rows committed faster than a few ms
  // apart share claims rather than each paying for its own.
  const newRows = windowed(wakeToLook, PGLITE_WAKE_WINDOW_MS);
  /** Gives back, after a failure, the claims this worker made and does not hold (`orphan-sweeps.ts`). */
  const orphans = createOrphanSweeps({ release: () => claimer.releaseOrphans(now()), wake, log });

  function setMode(next: WorkerMode): void {
    mode = nextMode(mode, next);
    claiming = next === 'idle' || next === 'running';
  }

  /** Gives claims back at once (a URL over its limit, or a shutdown): due again, unclaimed. */
  async function release(claims: readonly Claim[]): Promise<void> {
    if (claims.length === 0) return;
    const at = now();
    await database.delivery((db) => releaseClaims(db, claims, at));
  }

  /** Extends the leases of every claim held, so that no other instance takes one over. */
  async function renew(): Promise<void> {
    const claims = held.claims();
    if (claims.length === 0) return;
    const leaseEnd = new Date(now().getTime() + leaseMs);
    await database.delivery((db) => renewLeases(db, claims, leaseEnd));
  }

  /** Renews every third of a lease while claims are held. */
  function renewWhileBusy(): void {
    if (renewal || !claiming) return;
    renewal = setInterval(
      () => {
        if (held.heldCount === 0) {
          clearInterval(renewal);
          renewal = undefined;
          return;
        }
        renew().catch((error: unknown) => logFailure(log, error, 'renewing delivery leases failed'));
      },
      Math.max(1, Math.floor(leaseMs / 3)),
    );
    renewal.unref();
  }

  /**
   * Sends one attempt; resolves with its outcome once the response is read (before it is
   * recorded). An endpoint with a rate limit waits for the send time it reserved first, or, with
   * none free within the rate limiter's horizon, sends nothing and answers when to try again (`later`).
   */
  async function send(claim: Claim): Promise<SendResult> {
    if (claim.endpoint_id) {
      const reserved = await rateLimiter.reserve(claim.endpoint_id, now());
      if (reserved && 'dueAt' in reserved) return { later: reserved.dueAt };
      const wait = reserved ? reserved.sendAt.getTime() - now().getTime() : 0;
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    }
    // Standard Webhooks headers: the same webhook-id at every attempt, a fresh timestamp and
    // signature each time. The body stays exactly as written, checksum included.
    const signature = await keyring.sign(
      { businessId: claim.business_id, mode: claim.mode },
      claim.event_id,
      claim.payload,
      claim.endpoint_id,
    );
    const span = beginAttemptSpan(claim, traceparent);
    const startedAt = now();
    const t0 = performance.now();
    const sentAt = urlConcurrency.now();
    const stalledBefore = stalls.total();
    held.requestStarted(claim);
    const outcome = await client.send({
      url: claim.url,
      body: claim.payload,
      headers: {
        ...span.headers,
        ...signature,
        // For the receiver's logs only: not signed, never trusted for security.
        'payhook-event-id': claim.event_id,
        'payhook-delivery-id': claim.id,
        'payhook-attempt': String(claim.attempts + 1),
      },
    });
    span.end(outcome);
    const stalledMs = stalls.total() - stalledBefore;
    const answer = { sentAt, stalledMs, saturated: held.saturated(claim.url), endpointId: claim.endpoint_id };
    urlConcurrency.answered(claim.url, { ...outcome, ...answer });
    const sent = { signature: signature['webhook-signature'], endpointId: claim.endpoint_id };
    const hint = outcome.ok ? undefined : refusalHint(outcome, claim.business_id, sent);
    if (hint && hintDue(claim.url, hint)) {
      log.warn(
        { url: claim.url, event: claim.event_id, status: outcome.statusCode },
        `${claim.url}: ${hint}`,
      );
    }
    if (metrics) {
      const durationSeconds = (performance.now() - t0) / 1000;
      observeAttempt(metrics, {
        eventCreatedAt: claim.event_created_at,
        startedAt,
        outcome,
        durationSeconds,
      });
    }
    return { startedAt, outcome, hint };
  }

  /** Frees a slot once an attempt's response is in: recording it needs no connection to the URL. */
  function freeSlot(claim: Claim): void {
    const urlHeld = held.free(claim);
    if (!claiming) return;
    held.startReady();
    // The last claim took every row it could see due, and nothing has woken the worker since:
    // a claim now would find nothing (new rows wake it; retries come due at the poll).
    if (!maybeDue) return;
    // More work may be due, for this URL or another. Claims wait for some room, so that one
    // claim serves several attempts rather than one each (and see `HeldClaims.batching`).
    const idle = held.sendingCount + held.readyCount === 0;
    if (idle || (!held.batching(claim.url, urlHeld) && held.roomToClaim() > 0)) wake();
  }

  /** Begins the attempt of a ready claim (called by `HeldClaims.startReady`). */
  function begin(claim: Claim): void {
    held.slotTaken(claim);
    let freed = false;
    const done = send(claim)
      .then((sent) => {
        freed = true;
        freeSlot(claim);
        // Given back at shutdown: the claim is the queue's again, and nothing more is written.
        if (abandoned.has(claim.id)) return;
        // No send time free under its endpoint's rate limit: given back, due when one may be.
        const later = sent.later;
        if (later) {
          return database.delivery(async (db) => {
            await releaseClaims(db, [claim], later);
          });
        }
        // The claim stays in flight (its lease renewed, never claimed again here) until recorded.
        return record(claim, sent.startedAt, sent.outcome, sent.hint);
      })
      .catch((error: unknown) => {
        // Reading the signing secrets or recording the attempt failed: the claim is let go, and
        // given back by the sweep once the database answers (not a minute later, at its lease end).
        logFailure(log, error, 'a delivery attempt could not be signed or recorded', { delivery: claim.id });
        orphans.schedule();
      })
      .finally(() => {
        if (!freed) freeSlot(claim);
        held.finished(claim);
      });
    held.began(claim, done);
  }

  /**
   * Fills the free slots, from the ready rows first, then with due deliveries claimed ahead up to
   * the worker's capacity: while there is room, the claimer's pass makes the next claim (how many
   * rows, pacing, and whether to read on are its decisions), and its rows are held and started.
   * Returns how many attempts it started.
   */
  async function fill(): Promise<number> {
    let started = held.startReady();
    await orphans.runIfDue();
    const pass = claimer.pass();
    while (claiming) {
      const room = held.roomToClaim();
      if (room === 0) break;
      const at = now();
      const claimed = await pass.next(room, at);
      if (claimed === undefined) break;
      const over = held.hold(claimed.claims, claimed.rooms, at.getTime(), !claiming);
      // Rows may still be due: the claim left some, or a URL filled its room.
      maybeDue = claimed.leftDue || held.anyCapped;
      renewWhileBusy();
      started += held.startReady();
      await release(over);
      if (!claimed.readOn) break;
    }
    return started;
  }

  /** Looks for due deliveries: new ones may be due, past the backlogs of URLs at their limit. */
  function wakeToLook(): void {
    maybeDue = true;
    claimer.lookAgain();
    wake();
  }

  function wake(): void {
    // While the database is away, claims wait for it: its return wakes the worker (see start()).
    if (!claiming || database.health.state === 'down') return;
    pump.run().catch((error: unknown) => {
      logFailure(log, error, 'claiming deliveries failed');
      // A claim cut short may have committed on the server all the same.
      orphans.schedule();
    });
  }

  async function shutDown(): Promise<void> {
    setMode('stopping');
    try {
      stopWatchingHealth?.();
      orphans.stop();
      stalls.stop();
      clearInterval(poll);
      newRows.cancel();
      clearInterval(renewal);
      await unlisten?.().catch(() => {});
      await membership
        ?.leave()
        .catch((error: unknown) => logFailure(log, error, 'leaving the instances failed'));
      await pump.current()?.catch(() => {});
      // Rows claimed ahead and never begun go back at once.
      await release(held.dropReady()).catch((error: unknown) =>
        logFailure(log, error, 'releasing unstarted deliveries failed'),
      );
      const running = held.attemptsRunning();
      if (running.length > 0)
        await Promise.race([Promise.allSettled(running), sleep(graceMs, undefined, { ref: false })]);
      const left = held.claims();
      if (left.length > 0) {
        abandoned = new Set(left.map((claim) => claim.id));
        record.drop(abandoned);
        // With the database away, the stop goes on: their leases give them back instead.
        await release(left).then(
          () => log.warn({ released: left.length }, 'released deliveries still in flight at shutdown'),
          (err: unknown) =>
            log.warn(
              { left: left.length, err },
              'deliveries in flight at shutdown could not be released: each is sent again once its lease ends',
            ),
        );
      }
      // Released attempts are abandoned: their connections are cut rather than waited for, and
      // they end before the stop does, so that none touches a database closed after it.
      if (ownClient) {
        await (left.length > 0 ? client.destroy() : client.close());
        await Promise.allSettled(held.attemptsRunning());
      }
    } finally {
      setMode('stopped');
    }
  }

  return {
    async start() {
      setMode('running');
      // PGlite's directory is one process's (its lock refuses a second): no one to share with.
      if (database.kind === 'postgres')
        membership = await joinDeliveryInstances(database, {
          ...options.membership,
          // Another instance joined or left: the URLs moved. Rows claimed ahead and not begun go
          // back, due, for whichever instance now sends to their URL.
          onChange: (share) => {
            log.info(share, 'delivery instances changed');
            release(held.dropReady()).catch((error: unknown) => {
              logFailure(log, error, 'releasing deliveries failed');
              orphans.schedule();
            });
            wakeToLook();
          },
          onError: (error) => logFailure(log, error, 'the delivery instances heartbeat failed'),
        });
      unlisten = await database.listen(WAKE_CHANNEL, database.kind === 'pglite' ? newRows.wake : wakeToLook);
      // Back from an outage: claims cut short by it, which may have committed once the database
      // answered, are given back (due now, not at their lease end); wake-ups sent meanwhile were
      // lost, so due rows are looked for at once.
      stopWatchingHealth = database.health.onChange((change) => {
        if (change.state !== 'up') return;
        orphans.schedule();
        wakeToLook();
      });
      poll = setInterval(wakeToLook, pollIntervalMs);
      poll.unref();
      wakeToLook();
    },
    wake: wakeToLook,
    async runDue() {
      // Counted at the start of each attempt: wake-ups start some too, not only this loop.
      const before = held.begunCount;
      for (;;) {
        if (!claiming) return held.begunCount - before;
        await pump.run();
        if (held.heldCount === 0) {
          // Nothing running: one more look, in case a pass ended as the last attempt finished.
          await pump.run();
          if (held.heldCount === 0) return held.begunCount - before;
        }
        // Rows held ready wait for a slot that an attempt in flight frees. One shared promise, not
        // a race over every attempt in flight: that would add a reaction to each of them per turn.
        if (held.activeCount > 0) await held.nextDone();
      }
    },
    stop() {
      stopped ??= shutDown();
      return stopped;
    },
  };
}
