import { ERROR_STATUS, type PayhookErrorCode } from '../errors.js';
import type { Logger } from './logger.js';
import { closest } from './suggest.js';

/**
 * The codes a receiver refuses a request with: the `reason` of a `refused` outcome. Each is a
 * code of `ERROR_STATUS`, so a label value is also what the response body says. `internal_error`
 * is a request that made `handle()` reject (a bug), which the adapter answers 500.
 *
 * @example
 * ```ts
 * for (const reason of REFUSAL_REASONS) received.inc({ outcome: 'refused', reason }, 0); // series exist from the start
 * ```
 */
export const REFUSAL_REASONS = [
  'shutting_down',
  'ip_not_allowed',
  'client_address_unknown',
  'method_not_allowed',
  'unsupported_media_type',
  'payload_too_large',
  'invalid_signature',
  'signature_timestamp_out_of_tolerance',
  'signature_required',
  'malformed_payload',
  'invalid_checksum',
  'queue_full',
  'store_unavailable',
  'internal_error',
] as const satisfies readonly PayhookErrorCode[];

/** Why a request was refused: one of {@link REFUSAL_REASONS}. */
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

/**
 * What became of one request: `accepted` (recorded, answered 200, processed after the response),
 * `duplicate` (answered 200, not processed again) or `refused` with the error code it was answered
 * with. `status` is the HTTP status of the answer.
 */
export type ReceivedOutcome =
  | { readonly outcome: 'accepted'; readonly reason?: undefined; readonly status: 200 }
  | { readonly outcome: 'duplicate'; readonly reason?: undefined; readonly status: 200 }
  | { readonly outcome: 'refused'; readonly reason: RefusalReason; readonly status: number };

/** One run of an event's handlers (each local attempt is a run). */
export interface HandledRun {
  /** The event's name, as verified (an unknown name too: the checksum proved the service sent it). */
  readonly event: string;
  /** Which local attempt this was (1 for the first). */
  readonly attempt: number;
  /** How long the run took, in ms (up to the timeout for a run that timed out). */
  readonly durationMs: number;
  readonly ok: boolean;
  /** Why a run failed: a handler threw or rejected, or the handler timeout passed. */
  readonly code: 'handler_failed' | 'handler_timeout' | undefined;
}

/** A local retry about to wait before the next run. */
export interface RetriedRun {
  readonly event: string;
  /** The attempt that comes after the delay (2 for the first retry). */
  readonly nextAttempt: number;
  readonly delayMs: number;
}

/** An event whose handlers failed on every local attempt (the dead letter). */
export interface DeadLetteredEvent {
  readonly event: string;
  readonly attempts: number;
}

/**
 * An event found stale (docs/design.md, "Per-object order"): its rank is below the highest one
 * already handled for its object, so it went to `onStale` instead of its handlers, and is done.
 */
export interface StaleEvent {
  readonly event: string;
  /** The event's rank. */
  readonly rank: number;
  /** The highest rank handled for its object. */
  readonly objectRank: number;
}

/**
 * The receiver's metrics hook: plain callbacks, each optional, that a merchant maps onto
 * prom-client, OpenTelemetry metrics or StatsD. They are called synchronously on the request's
 * or the handler's path, so they should only count; one that throws (or returns a promise that
 * rejects) never breaks a request or a handler, and is logged once. The queue's gauges come from
 * `receiver.stats()`, read when the collector scrapes.
 *
 * @example
 * ```ts
 * const receiver = createReceiver({
 *   businessIds, allowedIps,
 *   metrics: {
 *     onReceived: ({ outcome, reason }) => received.inc({ outcome, reason: reason ?? '' }),
 *     onHandled: ({ event, durationMs, ok }) => handled.observe({ event, ok: String(ok) }, durationMs / 1000),
 *     onRetry: ({ event }) => retries.inc({ event }),
 *     onDeadLetter: ({ event }) => deadLetters.inc({ event }),
 *     onStale: ({ event }) => staleEvents.inc({ event }), // payhook_receiver_stale_events_total
 *   },
 * });
 * ```
 */
export interface ReceiverMetrics {
  /** Every request `handle()` answers, once, with its outcome. */
  onReceived?(outcome: ReceivedOutcome): unknown;
  /** Every run of an event's handlers, after it succeeded or failed. */
  onHandled?(run: HandledRun): unknown;
  /** Every local retry, before its delay. */
  onRetry?(retry: RetriedRun): unknown;
  /** Every event dead-lettered, once its failure is recorded. */
  onDeadLetter?(letter: DeadLetteredEvent): unknown;
  /**
   * Every event found stale under per-object order, before `onStale` takes it (a counter such
   * as `payhook_receiver_stale_events_total`).
   */
  onStale?(stale: StaleEvent): unknown;
}

/** The receiver's gauges, read by `receiver.stats()`. */
export interface ReceiverStats {
  /** Events held, from admission to the recorded outcome: what `maxQueuedEvents` bounds. */
  held: number;
  /** Body bytes of the events held: what `maxQueuedBytes` bounds. */
  heldBytes: number;
  /** Being claimed in the store (the request waits for the answer). */
  claiming: number;
  /** Claimed and acknowledged, waiting for the response to be written. */
  accepted: number;
  /** Waiting for a worker: the queue's depth. */
  queued: number;
  /** Whose handlers are running (or waiting between local retries). */
  running: number;
  /**
   * Of the `queued`, those parked until their object's turn (per-object order): another event of
   * the same payment runs, here or on another instance.
   */
  waitingForOrder: number;
  /** Events found stale under per-object order since the receiver started (a counter). */
  stale: number;
  maxQueuedEvents: number;
  maxQueuedBytes: number;
  concurrency: number;
}

const HOOKS = [
  'onReceived',
  'onHandled',
  'onRetry',
  'onDeadLetter',
  'onStale',
] as const satisfies readonly (keyof ReceiverMetrics)[];

/**
 * Checks the `metrics` option: an object (or a class instance) whose callbacks, if given, are
 * functions. Another `on...` function is refused as a misspelt callback, which would otherwise
 * count nothing without a word; other members (a class's own fields) are left alone.
 */
export function resolveMetrics(metrics: ReceiverMetrics | undefined): ReceiverMetrics | undefined {
  if (metrics === undefined) return undefined;
  if (metrics === null || typeof metrics !== 'object') {
    throw new TypeError(
      `Invalid metrics: ${String(metrics)} (expected an object of callbacks: ${HOOKS.join(', ')}).`,
    );
  }
  const members = metrics as Record<string, unknown>;
  for (const key of Object.keys(metrics)) {
    if (
      (HOOKS as readonly string[]).includes(key) ||
      !key.startsWith('on') ||
      typeof members[key] !== 'function'
    ) {
      continue;
    }
    const near = closest(key, HOOKS);
    throw new TypeError(
      `Invalid metrics: unknown callback "${key}"${near ? ` (did you mean "${near}"?)` : ''}; expected ${HOOKS.join(', ')}.`,
    );
  }
  for (const key of HOOKS) {
    const value = members[key];
    if (value !== undefined && typeof value !== 'function') {
      throw new TypeError(`Invalid metrics.${key}: expected a function, got ${typeof value}.`);
    }
  }
  return metrics;
}

const ACCEPTED: ReceivedOutcome = Object.freeze({ outcome: 'accepted', status: 200 });
const DUPLICATE: ReceivedOutcome = Object.freeze({ outcome: 'duplicate', status: 200 });

/**
 * The receiver's side of the hook: each call guarded, so a callback that throws costs the
 * merchant a metric, never a request or a handler. Outcomes are frozen objects made once, so a
 * request allocates nothing for its metric.
 */
export function createMetricHooks(metrics: ReceiverMetrics | undefined, logger: Logger) {
  const failed = new Set<string>();
  const report = (name: string, error: unknown) => {
    if (failed.has(name)) return;
    failed.add(name);
    logger.error(
      { err: error, hook: name },
      `payhook: metrics.${name} threw; the request or handler went on, and later errors of this callback are not logged`,
    );
  };
  const call = <T>(name: (typeof HOOKS)[number], value: T) => {
    const hook = metrics?.[name] as ((value: T) => unknown) | undefined;
    if (hook === undefined) return;
    try {
      const result = hook.call(metrics, value);
      if (
        result !== null &&
        typeof result === 'object' &&
        typeof (result as PromiseLike<unknown>).then === 'function'
      ) {
        (result as PromiseLike<unknown>).then(undefined, (error: unknown) => report(name, error));
      }
    } catch (error) {
      report(name, error);
    }
  };
  const refusals = new Map<string, ReceivedOutcome>();
  return {
    /** Whether handler runs are observed at all (their timing is skipped otherwise). */
    handledObserved: metrics?.onHandled !== undefined,
    requestsObserved: metrics?.onReceived !== undefined,
    accepted: () => call('onReceived', ACCEPTED),
    duplicate: () => call('onReceived', DUPLICATE),
    /**
     * A refusal. `handle()` refuses with the codes of REFUSAL_REASONS only; a `readBody` of an
     * adapter's own could reject with another PayhookError, whose code is passed on as it is.
     */
    refused(code: PayhookErrorCode, status: number) {
      if (metrics?.onReceived === undefined) return;
      let outcome = refusals.get(code);
      if (outcome === undefined || outcome.status !== status) {
        outcome = Object.freeze({ outcome: 'refused', reason: code as RefusalReason, status });
        if (status === ERROR_STATUS[code]) refusals.set(code, outcome);
      }
      call('onReceived', outcome);
    },
    handled: (run: HandledRun) => call('onHandled', run),
    retried: (retry: RetriedRun) => call('onRetry', retry),
    deadLettered: (letter: DeadLetteredEvent) => call('onDeadLetter', letter),
    stale: (stale: StaleEvent) => call('onStale', stale),
  };
}

/** The guarded hooks of a receiver. */
export type MetricHooks = ReturnType<typeof createMetricHooks>;
