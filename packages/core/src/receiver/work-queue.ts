import PQueue from 'p-queue';
import type { SignedPayload } from '../checksum.js';
import { PayhookError } from '../errors.js';
import { parseEvent } from '../events/parse-event.js';
import type { PayhookEvent, UnknownEvent } from '../events/types.js';
import type { IdempotencyStore } from '../store/types.js';
import type { Logger } from './logger.js';
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
}

/**
 * The in-process work queue of a receiver (DESIGN.md, "Work queue and idempotency"): runs each
 * accepted event's handlers in p-queue with a concurrency limit, a timeout and local retries,
 * keeps the event's lease renewed meanwhile, records the outcome in the store, dead-letters
 * what keeps failing, and claims events whose owner died.
 */
export function createWorkQueue(options: WorkQueueOptions) {
  const { store, instanceId, leaseMs, handlerTimeoutMs, retry, logger, registry, reportError } = options;
  const queue = new PQueue({ concurrency: options.concurrency });

  async function runHandlers(job: Job, context: HandlerContext): Promise<void> {
    const parsed = parseEvent(job.payload);
    const calls: Promise<unknown>[] = [];
    const call = (fn: () => unknown) => calls.push(Promise.resolve().then(fn));
    const event = (parsed.kind === 'known' ? parsed.event : job.payload) as PayhookEvent;
    // A known name whose data did not validate goes to onUnrecognized only: the typed handlers
    // (and onAny, whose known events narrow by name) never see data that contradicts its type.
    const typed = !(parsed.kind === 'unrecognized' && parsed.reason === 'invalid_data');
    if (typed) {
      for (const handler of registry.byName.get(job.payload.event) ?? [])
        call(() => (handler as EventHandler<PayhookEvent>)(event, context));
      for (const handler of registry.any) call(() => handler(event, context));
    }
    if (parsed.kind === 'unrecognized') {
      const info: UnrecognizedEvent = {
        event: job.payload as UnknownEvent,
        reason: parsed.reason,
        issues: parsed.issues,
      };
      for (const handler of registry.unrecognized) call(() => handler(info, context));
    }
    const results = await Promise.allSettled(calls);
    const failures = results
      .filter((r): r is PromiseRejectedResult => r.status === 'rejected')
      .map((r) => r.reason);
    if (failures.length === 1) throw failures[0];
    if (failures.length > 1)
      throw new AggregateError(failures, `${failures.length} handlers failed for ${job.payload.event}`);
  }

  async function attempt(job: Job, n: number): Promise<void> {
    // The abort signal is made only if a handler reads it: most never do, and one per attempt
    // showed in profiles.
    let controller: AbortController | undefined;
    const context: HandlerContext = {
      key: job.key,
      businessId: job.businessId,
      attempt: n,
      get signal() {
        controller ??= new AbortController();
        return controller.signal;
      },
    };
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const error = new PayhookError(
          'handler_timeout',
          `The handlers of ${job.payload.event} did not finish within ${handlerTimeoutMs} ms.`,
        );
        controller?.abort(error);
        reject(error);
      }, handlerTimeoutMs);
    });
    try {
      await Promise.race([runHandlers(job, context), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  // Keys this instance claimed and has not finished: claimed, queued or running.
  const inFlight = new Set<string>();
  // Leases of the events being processed, renewed together by one timer rather than one per event.
  const held = new Map<string, { lost: boolean }>();
  let renewalTimer: NodeJS.Timeout | undefined;
  const renewAll = () => {
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
  const release = (key: string) => {
    held.delete(key);
    if (held.size === 0 && renewalTimer !== undefined) {
      clearInterval(renewalTimer);
      renewalTimer = undefined;
    }
  };

  async function process(job: Job): Promise<void> {
    const lease = hold(job.key);
    let lastError: unknown;
    let attempts = 0;
    try {
      for (let n = 1; n <= retry.attempts; n++) {
        attempts = n;
        try {
          await attempt(job, n);
          lastError = undefined;
          break;
        } catch (error) {
          lastError = error;
          reportError(error, { key: job.key, attempt: n, phase: 'handler' });
          if (n < retry.attempts && !lease.lost) await sleep(retryDelay(n, retry));
        }
      }
    } finally {
      release(job.key);
    }
    if (lastError === undefined) {
      await record(() => store.complete(job.key, instanceId), job.key);
      logger.debug({ key: job.key, event: job.payload.event }, 'payhook: event processed');
      return;
    }
    await record(() => store.fail(job.key, instanceId, describe(lastError)), job.key);
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
   * Records an event's outcome. If the store cannot answer, it tries again, renewing the lease
   * meanwhile, for up to a lease's length: an outcome never recorded means another instance runs
   * the handlers again once the lease lapses.
   */
  async function record(fn: () => Promise<boolean>, key: string): Promise<void> {
    const lease = hold(key);
    let failingSince: number | undefined;
    try {
      for (let retry = 1; ; retry++) {
        try {
          if (!(await fn())) {
            logger.warn(
              { key },
              'payhook: the lease on this event passed to another instance before it finished',
            );
          }
          return;
        } catch (error) {
          reportError(error, { key, phase: 'store' });
          failingSince ??= Date.now();
          if (lease.lost || Date.now() - failingSince >= leaseMs) return;
          await sleep(Math.min(2000, 25 * 2 ** retry));
        }
      }
    } finally {
      release(key);
    }
  }

  const enqueue = (job: Job) => {
    inFlight.add(job.key);
    queue
      .add(() => process(job))
      // Only once the store knows the outcome may a new delivery of this key be claimed here again.
      .finally(() => inFlight.delete(job.key))
      .catch((error) => reportError(error, { key: job.key, phase: 'handler' }));
  };

  async function recover(): Promise<number> {
    let count = 0;
    for (;;) {
      const batch = await store.recover(instanceId, leaseMs, 100);
      for (const recovered of batch) {
        try {
          enqueue({
            key: recovered.key,
            payload: JSON.parse(recovered.payload),
            businessId: recovered.businessId,
          });
          count++;
        } catch (error) {
          reportError(error, { key: recovered.key, phase: 'recovery' });
        }
      }
      if (batch.length < 100) return count;
    }
  }

  return {
    enqueue,
    recover,
    /** True while this instance holds `key`: claimed, queued or running. */
    has: (key: string) => inFlight.has(key),
    /** Marks a key claimed by this instance, before its job is enqueued. */
    claimed: (key: string) => inFlight.add(key),
    idle: () => queue.onIdle(),
  };
}

function describe(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
