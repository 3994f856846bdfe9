import type { Database } from '../db/database.js';
import type { Resolver } from '../net/webhook-url.js';
import type { AttemptOutcome } from './attempt-outcome.js';
import type { AttemptFeed } from './feed.js';
import type { DeliveryClient } from './http-client.js';
import type { WorkerLogger } from './logger.js';
import type { MembershipOptions } from './membership.js';
import type { DeliveryMetrics } from './metrics.js';
import type { UrlConcurrency, UrlConcurrencyBounds } from './url-concurrency.js';

/** Options of `createDeliveryWorker` (`./worker.ts`). */
export interface DeliveryWorkerOptions {
  database: Database;
  /** Sends the attempts (default: `createDeliveryClient` with `resolve` and `allowPrivate`). */
  client?: DeliveryClient;
  /** Resolves webhook host names, for the default client (injectable for tests). */
  resolve?: Resolver;
  /** Development switch: deliver to private addresses too (the default client's option). */
  allowPrivate?: boolean;
  /** Attempts in flight at once, over every URL (default 64). */
  concurrency?: number;
  /**
   * Attempts in flight at once to one URL, over every instance, so that one slow receiver cannot
   * starve the others. By default each URL's limit follows how it answers: it starts at 4, grows by
   * one per limit's worth of fast answers while the URL has more due, and halves at a failure or an
   * answer slower than 1 s, within 1 to 32 (`UrlConcurrency`). Bounds change that; a number fixes
   * the limit; a `UrlConcurrency` is used as it is (`startSender` shares it with `/metrics` and the
   * dashboard).
   */
  perUrlConcurrency?: number | Partial<UrlConcurrencyBounds> | UrlConcurrency;
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
  /**
   * The heartbeat among the workers on one database, once started (default every 2 s, gone after
   * 10 s unheard): each URL is sent to by one of them, so its limit holds across instances.
   */
  membership?: Pick<MembershipOptions, 'heartbeatMs' | 'expireMs'>;
  /** Where each recorded attempt is published (the dashboard's live view, `payhook serve`'s lines). */
  feed?: AttemptFeed;
  /**
   * Sends each attempt's trace context to the receiver (`traceparent`, `tracestate`), injected by
   * the global OpenTelemetry propagator from the attempt's span (default false: receivers see it;
   * nothing is sent until an SDK is registered). `PAYHOOK_TRACEPARENT=1` turns it on in the service.
   */
  traceparent?: boolean;
}

/**
 * What one attempt's send came to: its outcome, once the response is read (before it is
 * recorded), or, with no send time free under its endpoint's rate limit, when to try again.
 */
export type SendResult =
  | { startedAt: Date; outcome: AttemptOutcome; hint: string | undefined; later?: undefined }
  | { later: Date };

/** The delivery worker of one sender instance. */
export interface DeliveryWorker {
  /** Listens for new events and polls for due retries until `stop()`; a worker starts once. */
  start(): Promise<void>;
  /** Looks for due deliveries now (new events wake it by themselves). */
  wake(): void;
  /**
   * Claims and attempts every delivery due now, and waits until none is due and none is in flight.
   * Returns the number of attempts made. For tests and tools that drive the clock themselves.
   */
  runDue(): Promise<number>;
  /**
   * Stops claiming, lets attempts in flight finish within the grace period, releases the rest.
   * A second call returns the first one's promise.
   */
  stop(): Promise<void>;
}

/** `value`, checked to be a positive integer, or `fallback` when not given. */
export function positive(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 1) {
    throw new TypeError(`Invalid ${name}: ${value} (a positive integer).`);
  }
  return value;
}

/**
 * The modes of a worker, changed only through its `setMode` (which asks {@link nextMode}):
 * - `idle`, as made: `wake` and `runDue` claim and attempt (tests and tools drive it so);
 * - `running`, from `start()`: also woken by every committed outbox write (`db/wake.ts`) and by a
 *   poll for due retries;
 * - `stopping`, from `stop()` (in `idle` or `running`): no more claims; rows claimed ahead are
 *   released, attempts in flight have the grace period to finish;
 * - `stopped`, when `stop()` is done: what was still in flight is released, an own client closed.
 */
export type WorkerMode = 'idle' | 'running' | 'stopping' | 'stopped';

const NEXT_MODES: Record<WorkerMode, readonly WorkerMode[]> = {
  idle: ['running', 'stopping'],
  running: ['stopping'],
  stopping: ['stopped'],
  stopped: [],
};

/** `next`, if a worker in mode `from` may go there; throws otherwise. */
export function nextMode(from: WorkerMode, next: WorkerMode): WorkerMode {
  if (!NEXT_MODES[from].includes(next)) {
    throw new Error(`A delivery worker cannot go from ${from} to ${next} (start it once, before stop).`);
  }
  return next;
}
