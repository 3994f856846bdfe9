import PQueue from 'p-queue';
import type { SignedPayload } from '../checksum.js';
import { PayhookError } from '../errors.js';
import { type ParseEventResult, parseEvent } from '../events/parse-event.js';
import type { PayhookEvent, UnknownEvent } from '../events/types.js';
import type { IdempotencyStore } from '../store/types.js';
import { type Logger, silentLogger, stderrLogger } from './logger.js';
import { type RetryOptions, retryDelay } from './retry.js';
import type { DeadLetter, ErrorInfo, EventHandler, HandlerContext, UnrecognizedEvent } from './types.js';

/** An accepted event on its way to the handlers. */
export interface Job {
  key: string;
  payload: SignedPayload;
  businessId: string;
}

/** The handlers a receiver registered, read at dispatch time. */
export interface HandlerRegistry {
  byName: Map<string, EventHandler<never>[]>;
  any: EventHandler<PayhookEvent>[];
  unrecognized: EventHandler<UnrecognizedEvent>[];
  deadLetter: ((letter: DeadLetter) => unknown)[];
}

/** What the work queue needs from its receiver. */
export interface WorkQueueOptions {
  store: IdempotencyStore;
  instanceId: string;
  leaseMs: number;
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
 * An event this instance holds, from the moment a request is admitted to claim it until its outcome
 * is recorded. Its key stays in `entries` all that time, so no second copy is claimed meanwhile.
 */
interface Entry {
  bytes: number;
  /** True until the store answered the claim. */
  claiming: boolean;
  /** Copies of this event that arrived while the claim was undecided. */
  waiters: ((outcome: ClaimOutcome) => void)[] | undefined;
  /** The accepted job, until it is started. */
  job: Job | undefined;
}

/**
 * The in-process work queue of a receiver (DESIGN.md, "Work queue and idempotency"): runs each
 * accepted event's handlers in p-queue with a concurrency limit, a timeout and local retries,
 * keeps the event's lease renewed meanwhile, records the outcome in the store, dead-letters
 * what keeps failing, and claims events whose owner died.
 *
 * What it costs per event was measured (pnpm bench:http) and kept low: p-queue runs up to
 * `concurrency` workers that each take accepted events in order until none is left, rather than
 * one p-queue task per event; the handler timeouts of every running attempt share one timer;
 * handlers are called directly, and an attempt whose handlers all return without a promise
 * finishes without waiting a turn.
 */
export function createWorkQueue(options: WorkQueueOptions) {
  const { store, instanceId, leaseMs, handlerTimeoutMs, retry, logger, registry, reportError } = options;
  const { concurrency, maxQueuedEvents, maxQueuedBytes } = options;
  const queue = new PQueue({ concurrency });

  // Every event this instance holds, by key, and the body bytes they carry (the bound on held work).
  const entries = new Map<string, Entry>();
  let heldBytes = 0;
  let closed = false;
  // Resolved when `entries` empties (idle and close wait on it).
  let emptied: (() => void)[] = [];
  let recovering: Promise<number> | undefined;

  // Accepted events waiting for a worker, in order; `head` is the next one.
  let waiting: Job[] = [];
  let head = 0;
  let workers = 0;

  const work = async () => {
    try {
      while (head < waiting.length) {
        const job = waiting[head] as Job;
        waiting[head++] = undefined as unknown as Job;
        if (head === waiting.length) {
          waiting = [];
          head = 0;
        } else if (head >= 1024 && head * 2 >= waiting.length) {
          // A queue that never empties under load is compacted now and then.
          waiting = waiting.slice(head);
          head = 0;
        }
        try {
          await process(job);
        } catch (error) {
          reportError(error, { key: job.key, phase: 'handler' });
        }
      }
    } finally {
      workers--;
    }
  };

  // Workers start in the check phase of the event loop: the events accepted in one turn of the
  // loop (one per request the turn answered) share them, instead of one p-queue task each.
  let starting: Promise<void> | undefined;
  const startWorkers = () => {
    const free = Math.min(concurrency - workers, waiting.length - head);
    for (let k = 0; k < free; k++) {
      workers++;
      queue.add(work).catch((error) => reportError(error, { phase: 'handler' }));
    }
  };

  const run = (job: Job) => {
    waiting.push(job);
    if (starting === undefined && workers < concurrency) {
      starting = new Promise<void>((resolve) =>
        setImmediate(() => {
          starting = undefined;
          startWorkers();
          resolve();
        }),
      );
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
      if (!entry.claiming) return DUPLICATE;
      entry.waiters ??= [];
      const waiters = entry.waiters;
      return { kind: 'pending', decided: new Promise((resolve) => waiters.push(resolve)) };
    }
    if (entries.size >= maxQueuedEvents || (entries.size > 0 && heldBytes + bytes > maxQueuedBytes)) {
      return FULL;
    }
    entries.set(key, { bytes, claiming: true, waiters: undefined, job: undefined });
    heldBytes += bytes;
    return ADMITTED;
  };

  /**
   * The store's answer to an admitted claim: with `job` the event was claimed and waits for
   * `start` (at once if the queue is closing); without, the key is let go.
   */
  const decide = (key: string, outcome: ClaimOutcome, job?: Job) => {
    const entry = entries.get(key);
    if (entry === undefined) return;
    const waiters = entry.waiters;
    entry.waiters = undefined;
    entry.claiming = false;
    if (outcome === 'claimed' && job !== undefined) {
      entry.job = job;
      // Renewed from acceptance, not from the start: an event may wait in the queue longer than a lease.
      hold(key);
      if (closed) start(key);
    } else {
      release(key, entry);
    }
    if (waiters !== undefined) for (const resolve of waiters) resolve(outcome);
  };

  /** Starts the accepted job of `key`; does nothing if it started already. */
  const start = (key: string) => {
    const entry = entries.get(key);
    const job = entry?.job;
    if (job === undefined) return;
    (entry as Entry).job = undefined;
    run(job);
  };

  /** Holds and starts a job that did not come through a request (recovery, replay). */
  const enqueue = (job: Job, bytes: number) => {
    const entry = entries.get(job.key);
    if (entry !== undefined) {
      // Held here already: this instance's own event, whose lease ran out while it waited or ran.
      // One whose response never started it (an adapter that did not call afterResponse) starts now.
      if (entry.job === undefined) return false;
      start(job.key);
      return true;
    }
    entries.set(job.key, { bytes, claiming: false, waiters: undefined, job: undefined });
    heldBytes += bytes;
    hold(job.key);
    run(job);
    return true;
  };

  const release = (key: string, entry: Entry) => {
    entries.delete(key);
    heldBytes -= entry.bytes;
    if (entries.size === 0 && emptied.length > 0) {
      const resolvers = emptied;
      emptied = [];
      for (const resolve of resolvers) resolve();
    }
  };

  /** Resolves when nothing is being claimed, accepted, queued or running. */
  const idle = (): Promise<void> => {
    if (entries.size === 0) return Promise.resolve();
    return new Promise<void>((resolve) => emptied.push(resolve));
  };

  /**
   * Stops intake and finishes what was admitted: claims in flight are decided, every accepted
   * event is started whether or not its response was written, and a recovery in progress ends;
   * resolves once all of it has been processed and recorded.
   */
  const close = async () => {
    closed = true;
    if (recovering !== undefined) await recovering.catch(() => 0);
    for (const [key, entry] of entries) if (entry.job !== undefined) start(key);
    await idle();
  };

  // Handler timeouts. Attempts start in order and share one timeout, so their deadlines come in
  // order too: one timer, armed for the oldest, serves them all.
  interface Deadline {
    at: number;
    expire(): void;
  }
  const deadlines = new Set<Deadline>();
  let deadlineTimer: NodeJS.Timeout | undefined;
  let deadlineTimerAt = 0;
  const onDeadlineTimer = () => {
    deadlineTimer = undefined;
    const now = performance.now();
    for (const deadline of deadlines) {
      if (deadline.at > now) {
        armDeadlineTimer(deadline.at);
        return;
      }
      deadlines.delete(deadline);
      deadline.expire();
    }
  };
  const armDeadlineTimer = (at: number) => {
    deadlineTimerAt = at;
    deadlineTimer = setTimeout(onDeadlineTimer, Math.max(0, at - performance.now()));
  };
  const watch = (deadline: Deadline) => {
    deadlines.add(deadline);
    if (deadlineTimer === undefined) {
      armDeadlineTimer(deadline.at);
    } else if (deadlineTimerAt > deadline.at) {
      clearTimeout(deadlineTimer);
      armDeadlineTimer(deadline.at);
    } else {
      // Armed for an earlier deadline: it fires first, then re-arms for this one.
      deadlineTimer.ref();
    }
  };
  const unwatch = (deadline: Deadline) => {
    deadlines.delete(deadline);
    // Nothing left to time out: the timer stays armed (it finds nothing to do) but no longer
    // keeps the process alive.
    if (deadlines.size === 0) deadlineTimer?.unref();
  };

  /**
   * One run of an event's handlers, all of them at once. Returns nothing when every handler
   * returned without a promise, a promise otherwise; throws (or rejects) with the failure, an
   * AggregateError if several failed, or `handler_timeout`.
   */
  function attempt(job: Job, n: number, parsed: ParseEventResult): Promise<void> | undefined {
    const context = new Context(job.key, job.businessId, n);
    // Handlers are called in turn; what they return or throw is gathered (arrays made only when needed).
    let pending: PromiseLike<unknown>[] | undefined;
    let failures: unknown[] | undefined;
    const typed = !(parsed.kind === 'unrecognized' && parsed.reason === 'invalid_data');
    // A known name whose data did not validate goes to onUnrecognized only: the typed handlers
    // (and onAny, whose known events narrow by name) never see data that contradicts its type.
    const named = typed ? registry.byName.get(job.payload.event) : undefined;
    const any = typed ? registry.any : NONE;
    const unrecognized = parsed.kind === 'unrecognized' ? registry.unrecognized : NONE;
    const event = parsed.kind === 'known' ? parsed.event : job.payload;
    const info: UnrecognizedEvent | undefined =
      unrecognized.length > 0 && parsed.kind === 'unrecognized'
        ? { event: job.payload as UnknownEvent, reason: parsed.reason, issues: parsed.issues }
        : undefined;
    const lists = [named ?? NONE, any, unrecognized] as const;
    for (let l = 0; l < 3; l++) {
      const list = lists[l] as readonly EventHandler<never>[];
      const argument = l === 2 ? info : event;
      for (let h = 0; h < list.length; h++) {
        try {
          const result = (list[h] as (event: unknown, context: HandlerContext) => unknown)(argument, context);
          if (isThenable(result)) {
            if (pending === undefined) pending = [];
            pending.push(result);
          }
        } catch (error) {
          if (failures === undefined) failures = [];
          failures.push(error);
        }
      }
    }
    if (pending === undefined) {
      if (failures !== undefined) throw combine(failures, job);
      return undefined;
    }
    const running = pending;
    return new Promise<void>((resolve, reject) => {
      const deadline: Deadline = {
        at: performance.now() + handlerTimeoutMs,
        expire: () => {
          const error = new PayhookError(
            'handler_timeout',
            `The handlers of ${job.payload.event} did not finish within ${handlerTimeoutMs} ms.`,
          );
          Context.abort(context, error);
          reject(error);
        },
      };
      watch(deadline);
      Promise.allSettled(running).then((results) => {
        unwatch(deadline);
        const all = failures ?? [];
        for (const result of results) if (result.status === 'rejected') all.push(result.reason);
        if (all.length > 0) reject(combine(all, job));
        else resolve();
      });
    });
  }

  // Leases of the events being processed, renewed together by one timer rather than one per event.
  // The timer runs while anything is held; it stops at the first tick that finds nothing.
  const held = new Map<string, { lost: boolean }>();
  let renewalTimer: NodeJS.Timeout | undefined;
  const renewAll = () => {
    if (held.size === 0) {
      clearInterval(renewalTimer);
      renewalTimer = undefined;
      return;
    }
    for (const [key, lease] of held) {
      store.renew(key, instanceId, leaseMs).then(
        (ok) => {
          if (!ok) lease.lost = true;
        },
        (error) => reportError(error, { key, phase: 'store' }),
      );
    }
  };
  const hold = (key: string) => {
    const lease = { lost: false };
    held.set(key, lease);
    if (renewalTimer === undefined) {
      renewalTimer = setInterval(renewAll, Math.max(10, Math.floor(leaseMs / 3)));
      renewalTimer.unref();
    }
    return lease;
  };

  /**
   * An authentic event that no handler will see is acknowledged (the sender must not retry it),
   * so it is never dropped in silence: unless onUnrecognized takes it, or handlers take an event
   * name payhook does not know yet, it is logged.
   */
  function warnUnhandled(job: Job, parsed: Extract<ParseEventResult, { kind: 'unrecognized' }>): void {
    if (registry.unrecognized.length > 0) return;
    if (
      parsed.reason === 'unknown_event' &&
      (registry.any.length > 0 || registry.byName.has(job.payload.event))
    ) {
      return;
    }
    logger.warn(
      { key: job.key, event: job.payload.event, reason: parsed.reason, issues: parsed.issues },
      `payhook: authentic event ${job.payload.event} acknowledged but not handled (${parsed.reason}); register onUnrecognized to handle such events`,
    );
  }

  async function process(job: Job): Promise<void> {
    // The lease is held, and renewed, from acceptance until the outcome is recorded.
    const lease = held.get(job.key) ?? hold(job.key);
    let lastError: unknown;
    let attempts = 0;
    try {
      if (lease.lost) {
        // Another instance took the event over while it waited here: it is that instance's now.
        logger.warn(
          { key: job.key },
          'payhook: the lease on a queued event passed to another instance; not run here',
        );
        return;
      }
      const parsed = parseEvent(job.payload);
      if (parsed.kind === 'unrecognized') warnUnhandled(job, parsed);
      for (let n = 1; n <= retry.attempts; n++) {
        attempts = n;
        try {
          const running = attempt(job, n, parsed);
          if (running !== undefined) await running;
          lastError = undefined;
          break;
        } catch (error) {
          lastError = error;
          reportError(error, { key: job.key, attempt: n, phase: 'handler' });
          if (n < retry.attempts && !lease.lost) await sleep(retryDelay(n, retry));
        }
      }
      if (lastError === undefined) {
        await record(job.key, lease, undefined);
        if (logger !== silentLogger && logger !== stderrLogger) {
          logger.debug({ key: job.key, event: job.payload.event }, 'payhook: event processed');
        }
        return;
      }
      await record(job.key, lease, describe(lastError));
    } finally {
      held.delete(job.key);
      // Only once the store knows the outcome may a new delivery of this key be claimed here
      // again; from then on it may, even while the dead-letter callbacks below still run (a
      // redelivery of a failed event is a second chance, not a duplicate).
      const entry = entries.get(job.key);
      if (entry !== undefined) release(job.key, entry);
    }
    const letter: DeadLetter = {
      key: job.key,
      event: job.payload as PayhookEvent,
      error: lastError,
      attempts,
    };
    logger.warn({ key: job.key, event: job.payload.event, attempts }, 'payhook: event dead-lettered');
    for (const handler of registry.deadLetter) {
      try {
        await handler(letter);
      } catch (error) {
        reportError(error, { key: job.key, phase: 'callback' });
      }
    }
  }

  /**
   * Records an event's outcome: done, or failed with `error`. If the store cannot answer, it tries again, the lease renewed
   * meanwhile, for up to a lease's length: an outcome never recorded means another instance runs
   * the handlers again once the lease lapses.
   */
  async function record(key: string, lease: { lost: boolean }, error: string | undefined): Promise<void> {
    let failingSince: number | undefined;
    for (let retry = 1; ; retry++) {
      try {
        const recorded =
          error === undefined
            ? await store.complete(key, instanceId)
            : await store.fail(key, instanceId, error);
        if (!recorded) {
          logger.warn(
            { key },
            'payhook: the lease on this event passed to another instance before it finished',
          );
        }
        return;
      } catch (storeError) {
        reportError(storeError, { key, phase: 'store' });
        failingSince ??= Date.now();
        if (lease.lost || Date.now() - failingSince >= leaseMs) return;
        await sleep(Math.min(2000, 25 * 2 ** retry));
      }
    }
  }

  /**
   * Claims and processes events whose owner's lease lapsed, no more than the room left under the
   * bound; one recovery at a time.
   */
  function recover(): Promise<number> {
    if (closed) return Promise.resolve(0);
    recovering ??= recoverBatches().finally(() => {
      recovering = undefined;
    });
    return recovering;
  }

  async function recoverBatches(): Promise<number> {
    let count = 0;
    for (;;) {
      const room = closed ? 0 : Math.min(100, maxQueuedEvents - entries.size);
      if (room <= 0) return count;
      const batch = await store.recover(instanceId, leaseMs, room);
      for (const recovered of batch) {
        try {
          const job = {
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

  return { admit, decide, start, enqueue, recover, idle, close };
}

/** The work queue of a receiver. */
export type WorkQueue = ReturnType<typeof createWorkQueue>;

const ADMITTED: Admission = { kind: 'admitted' };
const DUPLICATE: Admission = { kind: 'duplicate' };
const FULL: Admission = { kind: 'full' };
const CLOSING: Admission = { kind: 'closing' };

const NONE: readonly never[] = [];

/**
 * The context of one attempt. Its abort signal is made only if a handler reads it: most never
 * do, and one per attempt showed in profiles. A class with the getter on its prototype, because
 * an object literal with a getter cost close to a microsecond to create.
 */
class Context implements HandlerContext {
  #controller: AbortController | undefined;

  constructor(
    readonly key: string,
    readonly businessId: string,
    readonly attempt: number,
  ) {}

  get signal(): AbortSignal {
    this.#controller ??= new AbortController();
    return this.#controller.signal;
  }

  /** Aborts the signal of `context`, if a handler asked for it (static: handlers see no method). */
  static abort(context: Context, reason: unknown): void {
    context.#controller?.abort(reason);
  }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

/** The error of a failed attempt: the one failure, or all of them. */
function combine(failures: unknown[], job: Job): unknown {
  if (failures.length === 1) return failures[0];
  return new AggregateError(failures, `${failures.length} handlers failed for ${job.payload.event}`);
}

function describe(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
