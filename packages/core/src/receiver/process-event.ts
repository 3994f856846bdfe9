import { type ParseEventResult, parseEvent } from '../events/parse-event.js';
import type { PayhookEvent } from '../events/types.js';
import type { IdempotencyStore } from '../store/types.js';
import { createHandlerRunner, type HandlerRegistry, type Job } from './handler-run.js';
import type { Lease } from './leases.js';
import { type Logger, silentLogger, stderrLogger } from './logger.js';
import type { MetricHooks } from './metrics.js';
import { observeRuns } from './observe-run.js';
import type { OrderedRun } from './order.js';
import { type RetryOptions, retryDelay } from './retry.js';
import type { Tracing } from './tracing.js';
import type { DeadLetter, ErrorInfo, ProcessedEvent } from './types.js';

/** What processing an event needs from its receiver. */
export interface ProcessEventOptions {
  store: IdempotencyStore;
  instanceId: string;
  leaseMs: number;
  handlerTimeoutMs: number;
  retry: Required<RetryOptions>;
  logger: Logger;
  registry: HandlerRegistry;
  reportError(error: unknown, info: ErrorInfo): void;
  /** The metrics hook, guarded. */
  hooks: MetricHooks;
  /** Spans around handler runs, unless tracing is off. */
  tracing: Tracing | undefined;
  /**
   * Called once the store knows the outcome (or the lease passed to another instance), before the
   * dead-letter callbacks: the work queue releases the event and its lease, and from then on a new
   * delivery of the key may be claimed again (a redelivery of a failed event is a second chance,
   * not a duplicate).
   */
  onRecorded(key: string, processed: ProcessedEvent): void;
}

/**
 * Processes one accepted event (docs/design.md, "Work queue and store contract"): its handlers under the
 * handler timeout, local retries with backoff, the outcome recorded in the store (done, or failed
 * with its error), then the dead-letter callbacks.
 */
export function createEventProcessor(options: ProcessEventOptions) {
  const { store, instanceId, leaseMs, retry, logger, registry, reportError, onRecorded, hooks } = options;
  const attempt = observeRuns(
    createHandlerRunner(registry, options.handlerTimeoutMs),
    hooks,
    options.tracing,
    retry.attempts,
  );
  // A store in the handlers' own database runs each attempt in a transaction that also marks the
  // event done: then a passing attempt is already recorded when it returns.
  const transact = store.runInTransaction?.bind(store);
  // Debug lines cost an object per event: built only for a logger that may print them.
  const debug = logger !== silentLogger && logger !== stderrLogger;

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
    const how =
      parsed.reason === 'unknown_event'
        ? `receiver.onUnknown('${job.payload.event}', handler) or onUnrecognized`
        : 'onUnrecognized';
    logger.warn(
      { key: job.key, event: job.payload.event, reason: parsed.reason, issues: parsed.issues },
      `payhook: authentic event ${job.payload.event} acknowledged but not handled (${parsed.reason}); register ${how} to handle such events`,
    );
  }

  /** Known names already warned about: one warning per name and receiver, not one per request. */
  const warnedNoHandler = new Set<string>();

  /**
   * A known event that no handler takes (no `on(name)`, no `onAny`) is acknowledged and marked
   * done as well, so it is logged too, once per name: a receiver may leave an event out on
   * purpose, and its log need not repeat that for every delivery.
   */
  function warnNoHandler(job: Job): void {
    const name = job.payload.event;
    if (registry.any.length > 0 || registry.byName.has(name) || warnedNoHandler.has(name)) return;
    warnedNoHandler.add(name);
    logger.warn(
      { key: job.key, event: name },
      `payhook: authentic event ${name} acknowledged but no handler is registered for it; register receiver.on('${name}', handler) or onAny (warned once per event name)`,
    );
  }

  /**
   * Records an event's outcome: done, or failed with `error`. If the store cannot answer, it tries
   * again, the lease renewed meanwhile, for up to a lease's length: an outcome never recorded means
   * another instance runs the handlers again once the lease lapses.
   */
  async function record(
    key: string,
    lease: Lease,
    error: string | undefined,
    complete = () => store.complete(key, instanceId),
  ): Promise<void> {
    let failingSince: number | undefined;
    for (let n = 1; ; n++) {
      try {
        const recorded = error === undefined ? await complete() : await store.fail(key, instanceId, error);
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
        await sleep(Math.min(2000, 25 * 2 ** n));
      }
    }
  }

  /**
   * Runs `job` under `lease`, which the work queue holds and renews from the event's acceptance
   * and drops when `onRecorded` releases it; `ordered` once it holds its object's lock
   * (per-object order: a stale event runs the onStale handlers, and its completion is the
   * order's).
   */
  return async function processEvent(job: Job, lease: Lease, ordered?: OrderedRun): Promise<void> {
    const run = ordered?.attempt ?? attempt;
    let lastError: unknown;
    let attempts = 0;
    // Until an outcome is recorded here, the event is another instance's (its lease passed).
    let processed: ProcessedEvent = TAKEN_OVER;
    // With a transactional store: whether the passing attempt committed its done mark.
    let committed = false;
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
      // A stale event goes to onStale alone, and the order's log line says so.
      if (ordered?.stale !== true) {
        if (parsed.kind === 'unrecognized') warnUnhandled(job, parsed);
        else warnNoHandler(job);
      }
      for (let n = 1; n <= retry.attempts; n++) {
        attempts = n;
        try {
          if (transact !== undefined) {
            committed = await transact(
              job.key,
              instanceId,
              (transaction) => run(job, n, parsed, transaction),
              ordered?.completion,
            );
          } else {
            const running = run(job, n, parsed);
            if (running !== undefined) await running;
          }
          lastError = undefined;
          break;
        } catch (error) {
          lastError = error;
          reportError(error, { key: job.key, attempt: n, phase: 'handler' });
          if (n < retry.attempts && !lease.lost) {
            const delayMs = retryDelay(n, retry);
            hooks.retried({ event: job.payload.event, nextAttempt: n + 1, delayMs });
            await sleep(delayMs);
          }
          if (lease.lost) break;
        }
      }
      if (lease.lost && lastError !== undefined) {
        // The lease passed to another instance between attempts (this one was cut off from the
        // store for longer than a lease): that instance runs the event now. Trying again here
        // would run the handlers twice at once, and a dead letter here would be a false one.
        logger.warn(
          { key: job.key, attempts },
          'payhook: the lease on this event passed to another instance between attempts; not retried here',
        );
        return;
      }
      if (lastError === undefined) {
        if (transact !== undefined && !committed) {
          // Rolled back: the event is another instance's now, which runs it in its own transaction.
          logger.warn(
            { key: job.key },
            'payhook: the lease on this event passed to another instance before it finished; its transaction was rolled back',
          );
          return;
        }
        processed = DONE;
        if (!committed) await record(job.key, lease, undefined, ordered?.complete);
        if (debug) logger.debug({ key: job.key, event: job.payload.event }, 'payhook: event processed');
        return;
      }
      processed = { outcome: 'failed', error: lastError };
      await record(job.key, lease, describe(lastError));
    } finally {
      onRecorded(job.key, processed);
    }
    const letter: DeadLetter = {
      key: job.key,
      event: job.payload as PayhookEvent,
      error: lastError,
      attempts,
    };
    logger.warn({ key: job.key, event: job.payload.event, attempts }, 'payhook: event dead-lettered');
    hooks.deadLettered({ event: job.payload.event, attempts });
    for (const handler of registry.deadLetter) {
      try {
        await handler(letter);
      } catch (error) {
        reportError(error, { key: job.key, phase: 'callback' });
      }
    }
  };
}

const DONE: ProcessedEvent = { outcome: 'done' };
const TAKEN_OVER: ProcessedEvent = { outcome: 'taken_over' };

function describe(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
