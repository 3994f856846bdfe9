import type { PayhookEvent } from '../events/types.js';
import type { ObjectLock, OrderedCompletion } from '../store/types.js';
import { createHandlerRunner, type Job } from './handler-run.js';
import type { Lease } from './leases.js';
import type { Logger } from './logger.js';
import type { MetricHooks } from './metrics.js';
import { observeRuns } from './observe-run.js';
import type { ResolvedOrder } from './order-options.js';
import type { RetryOptions } from './retry.js';
import type { Tracing } from './tracing.js';
import type { ErrorInfo } from './types.js';

/**
 * How an ordered event runs, once it holds its object's lock: `stale` if its rank is below the
 * object's (then `attempt` runs the `onStale` handlers instead of its own), and `complete`, which
 * records it done and raises the object's rank in one step, in place of the store's `complete`;
 * a store that runs attempts in transactions is given `completion` instead.
 */
export interface OrderedRun {
  stale: boolean;
  attempt: ReturnType<typeof observeRuns> | undefined;
  completion: OrderedCompletion;
  complete(): Promise<boolean>;
}

/** What {@link OrderGate.run} answers for an event parked until its object's turn. */
export const PARKED = Symbol('parked');

/** Processes one event (the work queue's `processEvent`), given how it runs in order. */
type Process = (job: Job, lease: Lease, ordered?: OrderedRun) => Promise<void>;

/** What per-object order needs from its receiver. */
export interface OrderGateOptions {
  order: ResolvedOrder;
  instanceId: string;
  handlerTimeoutMs: number;
  retry: Required<RetryOptions>;
  hooks: MetricHooks;
  tracing: Tracing | undefined;
  logger: Logger;
  reportError(error: unknown, info: ErrorInfo): void;
  /** Puts a parked event back in the work queue; false if the queue no longer holds it. */
  requeue(job: Job): boolean;
}

/** An object's turn on this instance: the event whose turn it is, and those waiting behind it. */
interface Turn {
  holder: string;
  waiting: Job[];
}

/** The first wait before a parked event asks for its object's lock again, and the longest. */
const FIRST_WAIT_MS = 10;
const LONGEST_WAIT_MS = 250;

/**
 * Per-object order on the receiving side (docs/design.md, "Per-object order"). Before an event's
 * handlers run, it takes its object's lock in the store; an event whose object is busy is
 * parked, not run, so the worker goes on with other objects. On this instance the events of one
 * object wait in arrival order behind the one whose turn it is, which alone asks the store; that
 * one, if another instance holds the lock, asks again after a backoff (10 ms doubling to 250
 * ms). An event whose rank is below its object's is stale: the `onStale` handlers run instead
 * of its own, and it is counted and marked done.
 */
export function createOrderGate(options: OrderGateOptions) {
  const { order, instanceId, logger, reportError, requeue, hooks } = options;
  const staleAttempt = observeRuns(
    createHandlerRunner(
      { byName: new Map(), any: order.staleHandlers, unrecognized: [], deadLetter: [] },
      options.handlerTimeoutMs,
    ),
    hooks,
    options.tracing,
    options.retry.attempts,
  );
  const turns = new Map<string, Turn>();
  // How many times each parked event found its object busy in the store (for its backoff).
  const asked = new Map<string, number>();
  // Events parked from their first wait until they hold the lock (or leave), for stats().
  const waiting = new Set<string>();
  let staleCount = 0;

  /** The event's object and rank; undefined when it is not ordered (or its orderKey failed). */
  const targetOf = (job: Job): { object: string; rank: number | undefined } | undefined => {
    const event = job.payload as PayhookEvent;
    try {
      const object = order.key(event);
      if (object === undefined) return undefined;
      const rank = order.rank(event);
      if (typeof object !== 'string' || object.length === 0) {
        throw new TypeError(
          `orderKey returned ${JSON.stringify(object)} (expected a non-empty string or undefined).`,
        );
      }
      if (rank !== undefined && (typeof rank !== 'number' || !Number.isFinite(rank))) {
        throw new TypeError(`orderRank returned ${String(rank)} (expected a finite number or undefined).`);
      }
      return { object, rank };
    } catch (error) {
      // A bug in the merchant's function: reported, and the event runs unordered rather than never.
      reportError(error, { key: job.key, phase: 'handler' });
      return undefined;
    }
  };

  /** Hands the object's turn to the next event waiting on this instance, if any. */
  const passTurn = (id: string, turn: Turn) => {
    for (let next = turn.waiting.shift(); next !== undefined; next = turn.waiting.shift()) {
      turn.holder = next.key;
      if (requeue(next)) return;
      waiting.delete(next.key);
    }
    turns.delete(id);
  };

  /** Asks again, after a backoff, for the lock another instance holds (or the store did not give). */
  const retryLater = (job: Job, id: string, turn: Turn) => {
    const n = (asked.get(job.key) ?? 0) + 1;
    asked.set(job.key, n);
    waiting.add(job.key);
    // Not unref'd: a parked event is acknowledged work, which close() waits for.
    setTimeout(
      () => {
        if (!requeue(job)) {
          asked.delete(job.key);
          waiting.delete(job.key);
          passTurn(id, turn);
        }
      },
      Math.min(LONGEST_WAIT_MS, FIRST_WAIT_MS * 2 ** (n - 1)),
    );
  };

  /**
   * Runs `job` through `process` in its object's order: at once if it is not ordered; parked
   * (answering {@link PARKED}, the worker is free) while another event of its object runs here
   * or holds the lock elsewhere; otherwise under the lock, stale or not.
   */
  async function run(job: Job, lease: Lease, process: Process): Promise<typeof PARKED | undefined> {
    const target = targetOf(job);
    if (target === undefined) {
      await process(job, lease);
      return undefined;
    }
    const id = `${job.businessId}\n${target.object}`;
    let turn = turns.get(id);
    if (turn === undefined) {
      turn = { holder: job.key, waiting: [] };
      turns.set(id, turn);
    } else if (turn.holder !== job.key) {
      turn.waiting.push(job);
      waiting.add(job.key);
      return PARKED;
    }
    let lock: ObjectLock | undefined;
    if (!lease.lost) {
      try {
        lock = await order.store.lock(job.key, instanceId, target.object);
      } catch (error) {
        // The store did not answer: asked again later, the event still held under its lease.
        reportError(error, { key: job.key, phase: 'store' });
      }
    }
    if (lock === undefined && !lease.lost) {
      retryLater(job, id, turn);
      return PARKED;
    }
    if (lock?.status === 'busy') {
      retryLater(job, id, turn);
      return PARKED;
    }
    asked.delete(job.key);
    waiting.delete(job.key);
    try {
      if (lock === undefined || lock.status === 'lost') {
        // Another instance has the event now: processing says so and releases it here.
        lease.lost = true;
        await process(job, lease);
        return undefined;
      }
      const stale = target.rank !== undefined && lock.rank !== undefined && target.rank < lock.rank;
      if (stale) {
        staleCount++;
        hooks.stale({
          event: job.payload.event,
          rank: target.rank as number,
          objectRank: lock.rank as number,
        });
        logger.info(
          {
            key: job.key,
            event: job.payload.event,
            object: target.object,
            rank: target.rank,
            objectRank: lock.rank,
          },
          `payhook: stale event: ${job.payload.event} comes before an event already handled for its object; ${order.staleHandlers.length > 0 ? 'handed to onStale' : 'not handled'} and marked done`,
        );
      }
      const completion = { object: target.object, rank: stale ? undefined : target.rank };
      await process(job, lease, {
        stale,
        attempt: stale ? staleAttempt : undefined,
        completion,
        complete: () => order.store.complete(job.key, instanceId, completion.object, completion.rank),
      });
      return undefined;
    } finally {
      passTurn(id, turn);
    }
  }

  /** For `receiver.stats()`: events parked for their object's turn, and stale events so far. */
  const stats = () => ({ waitingForOrder: waiting.size, stale: staleCount });

  return { run, stats };
}

/** The per-object order of a work queue. */
export type OrderGate = ReturnType<typeof createOrderGate>;
