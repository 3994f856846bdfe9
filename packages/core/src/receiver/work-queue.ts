import type { IdempotencyStore } from '../store/types.js';
import type { HandlerRegistry, Job } from './handler-run.js';
import { createLeases, type Lease } from './leases.js';
import type { Logger } from './logger.js';
import type { MetricHooks, ReceiverStats } from './metrics.js';
import { createOrderGate, PARKED } from './order.js';
import type { ResolvedOrder } from './order-options.js';
import { createEventProcessor } from './process-event.js';
import type { RetryOptions } from './retry.js';
import { afterThisTurn, type Timer, unref } from './timers.js';
import type { Tracing } from './tracing.js';
import type { ErrorInfo, ProcessedEvent } from './types.js';

export type { HandlerRegistry, Job } from './handler-run.js';

/** What the work queue needs from its receiver. */
export interface WorkQueueOptions {
  store: IdempotencyStore;
  instanceId: string;
  leaseMs: number;
  /** Events whose handlers run at once. */
  concurrency: number;
  handlerTimeoutMs: number;
  retry: Required<RetryOptions>;
  logger: Logger;
  registry: HandlerRegistry;
  reportError(error: unknown, info: ErrorInfo): void;
  /** Most events held at once: being claimed, accepted, queued or running. */
  maxQueuedEvents: number;
  /** Most body bytes held at once, over the same events. */
  maxQueuedBytes: number;
  hooks: MetricHooks;
  tracing: Tracing | undefined;
  /** Per-object order, unless it is off (or the store lacks it). */
  order: ResolvedOrder | undefined;
}

/**
 * What {@link WorkQueue.admit} decided for a verified request:
 * - `admitted`: the key is this request's to claim; report the claim with `decide`;
 * - `duplicate`: this instance holds the key already (accepted, queued or running);
 * - `pending`: another request of this instance is claiming the key; `decided` settles with that
 *   claim's outcome (`claimed` or `duplicate` make this copy a duplicate, `failed` a 503 as well);
 * - `full`: the bound on held work is reached; nothing was recorded;
 * - `closing`: the queue is closing and takes nothing new.
 */
export type Admission =
  | { kind: 'admitted' | 'duplicate' | 'full' | 'closing' }
  | { kind: 'pending'; decided: Promise<ClaimOutcome> };

/** How a claim ended, for the copies that waited on it. */
export type ClaimOutcome = 'claimed' | 'duplicate' | 'failed';

/**
 * The state of an event this instance holds, from admission until its outcome is recorded:
 *
 * ```
 *   admit ──> claiming ──decide(claimed)──> accepted ──start──> queued ──worker──> running ──> (released)
 *                 │                                               ▲
 *                 └──decide(duplicate | failed)──> (released)     └── enqueue (recovery, replay)
 * ```
 *
 * - `claiming`: the store is being asked; copies of the event wait for the answer.
 * - `accepted`: claimed and acknowledged; waits for its response to be written (`afterResponse`),
 *   or for `close()`, which starts it at once. Its lease is renewed from here on.
 * - `queued`: waits for one of the `concurrency` workers.
 * - `running`: its handlers run (with local retries); released once the store knows the outcome.
 */
type State = 'claiming' | 'accepted' | 'queued' | 'running';

interface Entry {
  state: State;
  bytes: number;
  /** Copies of this event that arrived while it was `claiming`. */
  waiters: ((outcome: ClaimOutcome) => void)[] | undefined;
  /** The job, from `accepted` on. */
  job: Job | undefined;
  /**
   * Its lease in the store, held (and renewed) from `accepted` until the entry is released: taken
   * and dropped here only, so no path can leave a lease renewed for an event no longer held.
   */
  lease: Lease | undefined;
}

/**
 * The in-process work queue of a receiver (docs/design.md, "Work queue and store contract"): one state
 * machine, documented on {@link State}, over every event this instance holds. It admits at most
 * one claim per key at a time and no more work than its bound, keeps the leases renewed, runs
 * the handlers on at most `concurrency` workers (one counter: `workers`), records outcomes,
 * recovers events whose owner died, and drains on `close()`.
 *
 * Its own loop rather than p-queue: a p-queue task with a timeout cost about 15 µs an event
 * against well under 1 µs here (docs/decisions.md, "The receiver's queue").
 */
export function createWorkQueue(options: WorkQueueOptions) {
  const { store, instanceId, leaseMs, concurrency, reportError, maxQueuedEvents, maxQueuedBytes } = options;
  const leases = createLeases({ store, instanceId, leaseMs, reportError });

  const entries = new Map<string, Entry>();
  let heldBytes = 0;
  let closed = false;
  // Resolved when `entries` empties (idle and close wait on it).
  let emptied: (() => void)[] = [];
  let recovering: Promise<number> | undefined;
  // Who waits for the end of one event's processing (`processed`); empty unless an adapter asks.
  const watchers = new Map<string, ((processed: ProcessedEvent) => void)[]>();

  const release = (key: string, processed: ProcessedEvent = NOT_HELD) => {
    const watching = watchers.size > 0 ? watchers.get(key) : undefined;
    if (watching !== undefined) {
      watchers.delete(key);
      for (const resolve of watching) resolve(processed);
    }
    const entry = entries.get(key);
    if (entry === undefined) return;
    entries.delete(key);
    heldBytes -= entry.bytes;
    if (entry.lease !== undefined) leases.drop(key);
    if (entries.size === 0 && emptied.length > 0) {
      const resolvers = emptied;
      emptied = [];
      for (const resolve of resolvers) resolve();
    }
  };

  const processEvent = createEventProcessor({ ...options, onRecorded: release });
  // Puts an event parked for its object's turn back in the queue.
  const requeue = (job: Job): boolean => {
    const entry = entries.get(job.key);
    if (entry === undefined) return false;
    push(entry, job);
    return true;
  };
  const order = options.order && createOrderGate({ ...options, order: options.order, requeue });

  // Queued jobs in order; `head` is the next one. Workers take them until none is left.
  let queue: Job[] = [];
  let head = 0;
  let workers = 0;

  const work = async () => {
    try {
      while (head < queue.length) {
        const job = queue[head] as Job;
        queue[head++] = undefined as unknown as Job;
        if (head === queue.length) {
          queue = [];
          head = 0;
        } else if (head >= 1024 && head * 2 >= queue.length) {
          // A queue that never empties under load is compacted now and then.
          queue = queue.slice(head);
          head = 0;
        }
        const entry = entries.get(job.key);
        if (entry?.lease === undefined) {
          // Every queued job has its entry and lease until it is recorded: reaching here is a bug.
          reportError(new Error(`payhook: queued event ${job.key} is not held`), {
            key: job.key,
            phase: 'handler',
          });
          continue;
        }
        entry.state = 'running';
        try {
          if (order === undefined) await processEvent(job, entry.lease);
          // Parked until its object's turn: the worker goes on with other events.
          else if ((await order.run(job, entry.lease, processEvent)) === PARKED) entry.state = 'queued';
        } catch (error) {
          reportError(error, { key: job.key, phase: 'handler' });
        }
      }
    } finally {
      workers--;
    }
  };

  // Workers start in the check phase of the event loop, after the responses of this turn are
  // written: the events accepted in one turn share them.
  let starting = false;
  const startWorkers = () => {
    starting = false;
    const free = Math.min(concurrency - workers, queue.length - head);
    for (let k = 0; k < free; k++) {
      workers++;
      work().catch((error) => reportError(error, { phase: 'handler' }));
    }
  };
  const push = (entry: Entry, job: Job) => {
    entry.state = 'queued';
    queue.push(job);
    if (!starting && workers < concurrency) {
      starting = true;
      afterThisTurn(startWorkers);
    }
  };

  /**
   * Decides whether a verified request may claim `key`: synchronously, so that of concurrent
   * copies exactly one is admitted, and before the store is asked, so that the bound holds for
   * claims in flight too. An event alone is admitted whatever its size.
   */
  const admit = (key: string, bytes: number): Admission => {
    if (closed) return CLOSING;
    const entry = entries.get(key);
    if (entry !== undefined) {
      if (entry.state !== 'claiming') return DUPLICATE;
      entry.waiters ??= [];
      return { kind: 'pending', decided: awaitClaim(entry.waiters) };
    }
    if (entries.size >= maxQueuedEvents || (entries.size > 0 && heldBytes + bytes > maxQueuedBytes)) {
      return FULL;
    }
    entries.set(key, { state: 'claiming', bytes, waiters: undefined, job: undefined, lease: undefined });
    heldBytes += bytes;
    return ADMITTED;
  };

  /**
   * The store's answer to an admitted claim: with `job` the event was claimed and is `accepted`
   * (started at once if the queue is closing); otherwise the key is released.
   */
  const decide = (key: string, outcome: ClaimOutcome, job?: Job) => {
    const entry = entries.get(key);
    if (entry === undefined || entry.state !== 'claiming') return;
    const waiters = entry.waiters;
    entry.waiters = undefined;
    if (outcome === 'claimed' && job !== undefined) {
      entry.state = 'accepted';
      entry.job = job;
      // Renewed from acceptance: an event may wait in the queue longer than a lease.
      entry.lease = leases.hold(key);
      if (closed) start(key);
    } else {
      release(key);
    }
    if (waiters !== undefined) for (const resolve of waiters) resolve(outcome);
  };

  /** Queues the accepted event of `key`; does nothing in any other state. */
  const start = (key: string) => {
    const entry = entries.get(key);
    if (entry?.state !== 'accepted' || entry.job === undefined) return;
    push(entry, entry.job);
  };

  /**
   * Holds and queues an event that did not come through a request (recovery, replay). False if
   * this instance holds it already: its own event, whose lease ran out while it waited or ran
   * (one still `accepted`, whose adapter never called afterResponse, is started now).
   */
  const enqueue = (job: Job, bytes: number): boolean => {
    const entry = entries.get(job.key);
    if (entry !== undefined) {
      if (entry.state !== 'accepted') return false;
      start(job.key);
      return true;
    }
    const held: Entry = { state: 'queued', bytes, waiters: undefined, job, lease: leases.hold(job.key) };
    entries.set(job.key, held);
    heldBytes += bytes;
    push(held, job);
    return true;
  };

  /** Resolves when nothing is being claimed, accepted, queued or running. */
  const idle = (): Promise<void> => {
    if (entries.size === 0) return Promise.resolve();
    return new Promise<void>((resolve) => emptied.push(resolve));
  };

  /**
   * Resolves once the processing of the event held under `key` has ended here and its outcome is
   * recorded, with how it ended; at once with `not_held` if this instance does not hold it.
   */
  const processed = (key: string): Promise<ProcessedEvent> => {
    if (!entries.has(key)) return Promise.resolve(NOT_HELD);
    return new Promise((resolve) => {
      const list = watchers.get(key);
      if (list === undefined) watchers.set(key, [resolve]);
      else list.push(resolve);
    });
  };

  /**
   * Stops intake and finishes what was admitted: claims in flight are decided, every accepted
   * event is started whether or not its response was written, and a recovery in progress ends;
   * resolves once all of it has been processed and recorded.
   */
  const close = async () => {
    closed = true;
    if (recovering !== undefined) await recovering.catch(() => 0);
    for (const key of entries.keys()) start(key);
    await idle();
  };

  /**
   * Claims and processes events whose owner's lease lapsed, no more than the room left under the
   * bound; one recovery at a time.
   */
  const recover = (): Promise<number> => {
    if (closed) return Promise.resolve(0);
    recovering ??= recoverBatches().finally(() => {
      recovering = undefined;
    });
    return recovering;
  };

  async function recoverBatches(): Promise<number> {
    let count = 0;
    for (;;) {
      const room = closed ? 0 : Math.min(100, maxQueuedEvents - entries.size);
      if (room <= 0) return count;
      const batch = await store.recover(instanceId, leaseMs, room);
      for (const recovered of batch) {
        try {
          const job: Job = {
            key: recovered.key,
            payload: JSON.parse(recovered.payload),
            businessId: recovered.businessId,
          };
          if (enqueue(job, recovered.payload.length)) count++;
        } catch (error) {
          reportError(error, { key: recovered.key, phase: 'recovery' });
        }
      }
      if (batch.length < room) return count;
    }
  }

  /** The gauges of `receiver.stats()`: counted when asked (a scrape), not kept on every change. */
  const stats = (): ReceiverStats => {
    const counts = { claiming: 0, accepted: 0, queued: 0, running: 0 };
    for (const entry of entries.values()) counts[entry.state]++;
    return {
      held: entries.size,
      heldBytes,
      ...counts,
      waitingForOrder: 0,
      stale: 0,
      ...order?.stats(),
      maxQueuedEvents,
      maxQueuedBytes,
      concurrency,
    };
  };

  return { admit, decide, start, enqueue, recover, idle, processed, close, stats };
}

/** How often a copy waiting on another request's claim looks at its outcome (see {@link awaitClaim}). */
const CLAIM_POLL_MS = 10;

/**
 * The outcome of another request's claim, for a copy of the event that waits on it: settled by
 * that claim's `decide`, and also read by a timer of the waiting request's own. On Workers a
 * request may not wait on a promise that only another request's work settles: workerd sees no
 * work of the waiting request's own, judges it hung and answers 500. The timer is such work, and
 * it reads the outcome where the other request's settling may not reach. Elsewhere the direct
 * settling wins and the timer is cleared.
 */
function awaitClaim(waiters: ((outcome: ClaimOutcome) => void)[]): Promise<ClaimOutcome> {
  let outcome: ClaimOutcome | undefined;
  let timer: Timer | undefined;
  const settled = new Promise<ClaimOutcome>((resolve) => {
    waiters.push((decided) => {
      outcome = decided;
      resolve(decided);
    });
  });
  const read = new Promise<ClaimOutcome>((resolve) => {
    const look = () => {
      if (outcome !== undefined) return resolve(outcome);
      timer = setTimeout(look, CLAIM_POLL_MS);
      unref(timer);
    };
    look();
  });
  return Promise.race([settled, read]).finally(() => clearTimeout(timer));
}

/** The work queue of a receiver. */
export type WorkQueue = ReturnType<typeof createWorkQueue>;

const NOT_HELD: ProcessedEvent = { outcome: 'not_held' };
const ADMITTED: Admission = { kind: 'admitted' };
const DUPLICATE: Admission = { kind: 'duplicate' };
const FULL: Admission = { kind: 'full' };
const CLOSING: Admission = { kind: 'closing' };
