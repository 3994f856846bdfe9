import type { SignedPayload } from '../checksum.js';
import { PayhookError } from '../errors.js';
import type { ParseEventResult } from '../events/parse-event.js';
import type { PayhookEvent, UnknownEvent } from '../events/types.js';
import { createDeadlines, type Deadline } from './deadlines.js';
import type { TraceCarrier } from './tracing.js';
import type { DeadLetter, EventHandler, HandlerContext, UnrecognizedEvent } from './types.js';

/** An accepted event on its way to the handlers. */
export interface Job {
  key: string;
  payload: SignedPayload;
  businessId: string;
  /** The request's trace headers, when it had any and tracing is on (none after a recovery). */
  trace?: TraceCarrier | undefined;
}

/** The handlers a receiver registered, read at dispatch time. */
export interface HandlerRegistry {
  byName: Map<string, EventHandler<never>[]>;
  any: EventHandler<PayhookEvent>[];
  unrecognized: EventHandler<UnrecognizedEvent>[];
  deadLetter: ((letter: DeadLetter) => unknown)[];
}

/**
 * Runs the handlers of one attempt of an event under the handler timeout. Handlers are called
 * directly, and an attempt whose handlers all return without a promise finishes without waiting
 * a turn (docs/decisions.md, "The receiver's queue").
 */
export function createHandlerRunner(registry: HandlerRegistry, handlerTimeoutMs: number) {
  const deadlines = createDeadlines();

  /**
   * One run of an event's handlers, all of them at once. Returns nothing when every handler
   * returned without a promise, a promise otherwise; throws (or rejects) with the failure, an
   * AggregateError if several failed, or `handler_timeout`. `transaction` is the store's, when it
   * runs attempts in transactions (`IdempotencyStore.runInTransaction`).
   */
  function attempt(
    job: Job,
    n: number,
    parsed: ParseEventResult,
    transaction?: unknown,
  ): Promise<void> | undefined {
    const context = new Context(job.key, job.businessId, n, transaction);
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
      deadlines.watch(deadline);
      Promise.allSettled(running).then((results) => {
        deadlines.unwatch(deadline);
        const all = failures ?? [];
        for (const result of results) if (result.status === 'rejected') all.push(result.reason);
        if (all.length > 0) reject(combine(all, job));
        else resolve();
      });
    });
  }

  return attempt;
}

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
    readonly transaction: unknown,
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
