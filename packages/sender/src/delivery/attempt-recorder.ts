import type { Database } from '../db/database.js';
import { isConnectionLost } from '../db/health.js';
import type { AttemptOutcome } from './attempt-outcome.js';
import { type AttemptRecord, type Claim, recordAttemptsStatement } from './delivery-state.js';
import { type AttemptFeed, eventTypeOf } from './feed.js';
import type { WorkerLogger } from './logger.js';
import { receiverErrorCode } from './refusal-hint.js';
import { retryAfterTime } from './retry-after.js';
import { nextAttemptAt } from './schedule.js';
import { RECORD_BATCH, RECORD_WINDOW_MS } from './tuning.js';

/** What {@link createAttemptRecorder} needs of its worker. */
export interface AttemptRecorderOptions {
  database: Database;
  /** The worker's clock. */
  now: () => Date;
  /** The random source of the retry jitter. */
  random: () => number;
  logger: WorkerLogger;
  /** Where recorded attempts are published, when someone listens. */
  feed?: AttemptFeed | undefined;
  /**
   * How long an outcome is kept and written again while the database is away (default 30 s, half
   * the default lease): its delivery is then not sent a second time when the lease ends.
   */
  retryForMs?: number;
}

/** Records an attempt's outcome (see {@link createAttemptRecorder}). */
export interface AttemptRecorder {
  (claim: Claim, startedAt: Date, outcome: AttemptOutcome, hint?: string): Promise<void>;
  /**
   * Gives up the outcomes of these claims not yet written (given back at a shutdown): their
   * promises resolve at once, and none is written, nor tried again while the database is away.
   */
  drop(claimIds: ReadonlySet<string>): void;
}

/**
 * The delivery worker's attempt log: each outcome becomes an attempt row and the delivery's next
 * state (delivered, failed for good, or its next attempt on the retry schedule), written in
 * one statement for many outcomes at once (docs/decisions.md, "Attempt records are
 * group-committed"). The returned function resolves once its outcome is written.
 */
export function createAttemptRecorder(options: AttemptRecorderOptions): AttemptRecorder {
  const { database, now, random, logger: log, feed } = options;
  const retryForMs = options.retryForMs ?? 30_000;

  /** An attempt's outcome waiting to be written, and who waits for it. */
  interface Pending {
    claim: Claim;
    startedAt: Date;
    outcome: AttemptOutcome;
    /** What the refusal most likely means (`refusalHint`), for the feed's attempt lines. */
    hint?: string | undefined;
    /** Past this (process time, ms), a write lost to an outage is given up. */
    retryUntil: number;
    /** Written again after a lost connection: the first write may have committed after all. */
    again?: boolean;
    done: (error?: unknown) => void;
  }
  const unwritten: Pending[] = [];
  let writing = false;
  /** The wait before writing again after a lost connection: 250 ms, doubling to 2 s. */
  let backoff = 250;

  /**
   * Records an attempt and the delivery's next state, if the worker still holds the claim.
   * Outcomes that finish while a write is running go together in the next one (group commit):
   * one statement and one commit for many deliveries. With no write running, the first outcome
   * waits {@link RECORD_WINDOW_MS} for others, and so do fewer than {@link RECORD_BATCH} that
   * came in during a write: with few attempts in flight (a URL at its limit), writing them at
   * once made a statement and a commit for every one or two, and cost a third of the rate.
   */
  function record(claim: Claim, startedAt: Date, outcome: AttemptOutcome, hint?: string): Promise<void> {
    return new Promise((resolve, reject) => {
      unwritten.push({
        claim,
        startedAt,
        outcome,
        hint,
        retryUntil: Date.now() + retryForMs,
        done: (error) => (error ? reject(error) : resolve()),
      });
      if (!writing) {
        writing = true;
        setTimeout(() => void writeAll(), RECORD_WINDOW_MS);
      }
    });
  }

  async function writeAll(): Promise<void> {
    for (;;) {
      const batch = unwritten.splice(0, 500);
      if (batch.length === 0) break; // dropped while it waited
      try {
        await writeBatch(batch);
        backoff = 250;
        for (const p of batch) p.done();
      } catch (error) {
        // The database is away: the outcomes wait for it, within their lease. Written again, a
        // statement that did commit before its answer was lost matches no claim and changes nothing.
        const keep = isConnectionLost(error) ? batch.filter((p) => Date.now() < p.retryUntil) : [];
        for (const p of batch) if (!keep.includes(p)) p.done(error);
        // Given up while they were being written: not tried again.
        takeOut(dropped, keep);
        if (keep.length > 0) {
          for (const p of keep) p.again = true;
          unwritten.unshift(...keep);
          setTimeout(() => void writeAll(), backoff);
          backoff = Math.min(2000, backoff * 2);
          return;
        }
      }
      if (unwritten.length === 0) break;
      if (unwritten.length < RECORD_BATCH) {
        // A few came in during the write: they wait a window for more, as the first one did.
        setTimeout(() => void writeAll(), RECORD_WINDOW_MS);
        return;
      }
    }
    writing = false;
  }

  /** Claims whose outcomes were given up: one being written when they were is not kept after. */
  const dropped = new Set<string>();

  function drop(claimIds: ReadonlySet<string>): void {
    for (const id of claimIds) dropped.add(id);
    takeOut(claimIds, unwritten);
  }

  /** Takes the outcomes of `claimIds` out of `from` and resolves them unwritten. */
  function takeOut(claimIds: ReadonlySet<string>, from: Pending[]): void {
    for (let i = from.length - 1; i >= 0; i--) {
      const pending = from[i] as Pending;
      if (!claimIds.has(pending.claim.id)) continue;
      from.splice(i, 1);
      pending.done();
    }
  }

  async function writeBatch(batch: Pending[]): Promise<void> {
    // The next state of each delivery: delivered, failed for good, or due at its next attempt.
    const rows = batch.map(({ claim, startedAt, outcome }): AttemptRecord => {
      const attempts = claim.attempts + 1;
      const first = claim.first_attempt_at ?? startedAt;
      // A receiver's Retry-After counts from its answer: the attempt's start plus its latency.
      const notBefore = outcome.retryAfter
        ? retryAfterTime(outcome.retryAfter, new Date(startedAt.getTime() + outcome.latencyMs))
        : null;
      const next = outcome.ok
        ? null
        : nextAttemptAt({ attempts, firstAttemptAt: first, lastAttemptAt: startedAt, notBefore }, random);
      const status = outcome.ok ? 'delivered' : next === null ? 'failed' : 'pending';
      return { claim, attempts, first, next, status, startedAt, outcome };
    });
    const statement = recordAttemptsStatement(rows, now().toISOString());
    const result = await database.delivery((db) => statement.execute(db));
    const kept = new Set(result.rows.map((r) => r.id));
    if (feed?.active) {
      feed.publish(
        rows
          .map((r, i) => ({ ...r, hint: batch[i]?.hint }))
          .filter((r) => kept.has(r.claim.id))
          .map((r) => ({
            eventId: r.claim.event_id,
            eventType: eventTypeOf(r.claim.payload),
            businessId: r.claim.business_id,
            mode: r.claim.mode,
            deliveryId: r.claim.id,
            url: r.claim.url,
            attempt: r.attempts,
            status: r.status,
            statusCode: r.outcome.statusCode,
            latencyMs: r.outcome.latencyMs,
            errorCode: r.outcome.error?.code ?? null,
            receiverCode: r.outcome.ok ? null : (receiverErrorCode(r.outcome.responseBody) ?? null),
            hint: r.hint ?? null,
            startedAt: r.startedAt,
          })),
      );
    }
    for (const [i, r] of rows.entries()) {
      // A write again after a lost connection finds no claim when the first one did commit.
      if (!kept.has(r.claim.id) && batch[i]?.again) continue;
      if (!kept.has(r.claim.id)) {
        log.warn(
          { delivery: r.claim.id, url: r.claim.url },
          'delivery lease lost before its attempt was recorded',
        );
      } else if (r.status === 'failed') {
        log.warn(
          { delivery: r.claim.id, url: r.claim.url, attempts: r.attempts },
          'delivery failed for good: 48 hours passed',
        );
      }
    }
  }

  return Object.assign(record, { drop });
}
