import { performance } from 'node:perf_hooks';
import { BEST_DRIFT, LATENCY_WEIGHT, QUEUE_FACTOR, QUEUE_SLACK_MS, URLS_KEPT } from './tuning.js';

/**
 * The bounds of each URL's concurrency (the attempts sent to it at once, over every instance), and
 * what counts as a slow answer. A URL starts at `initial`; its limit moves within `[min, max]`.
 */
export interface UrlConcurrencyBounds {
  /** Where a URL not yet answered starts (default 4). */
  initial: number;
  /** The least a URL keeps, however it answers (default 1). */
  min: number;
  /** The most a URL gets, however fast (default 32: half of the worker's default 64). */
  max: number;
  /** An answer slower than this counts as a failure: the URL's limit is halved (default 1,000 ms). */
  slowMs: number;
}

/** The defaults of {@link UrlConcurrencyBounds}. */
export const URL_CONCURRENCY_DEFAULTS: Readonly<UrlConcurrencyBounds> = Object.freeze({
  initial: 4,
  min: 1,
  max: 32,
  slowMs: 1000,
});

/** What one answer of a URL was, for {@link UrlConcurrency.answered}. */
export interface UrlAnswer {
  /** A 200: the attempt delivered. */
  ok: boolean;
  /** From the start of the attempt to its answer (or its failure), in ms. */
  latencyMs: number;
  /**
   * How much of `latencyMs` this thread's own event loop ran late (loop-stalls.ts), in ms: not the
   * URL's doing, so not learnt from. Default 0.
   */
  stalledMs?: number;
  /** The clock's time at the attempt's start ({@link UrlConcurrency.now}). */
  sentAt: number;
  /**
   * Whether the URL wanted more room when the answer came: every one of its slots in use, or rows
   * held ready for it. A URL that has room to spare does not grow.
   */
  saturated: boolean;
  /** The endpoint the attempt was for, named in {@link UrlConcurrency.snapshot}. */
  endpointId?: string | null;
}

interface UrlState {
  /** The limit, in the bounds. */
  limit: number;
  /** Fast answers since the limit last moved: at `limit` of them, it grows by one. */
  credit: number;
  /** Moving average of the answers' latency, ms. */
  latency: number;
  /** The best latency average seen, drifting up slowly. */
  best: number;
  /** When the limit was last cut: answers to attempts sent before it cut it no further. */
  cutAt: number;
  /** Endpoints seen sending to this URL (most often one). */
  endpoints: Set<string>;
}

/** One URL's concurrency as {@link UrlConcurrency.snapshot} reports it. */
export interface UrlConcurrencyState {
  url: string;
  /** This instance's view of the URL's limit (attempts at once, over every instance). */
  limit: number;
  /** Moving average of its answers' latency (less the sender's own stalls), ms. */
  latencyMs: number;
  /** The endpoints that send to it. */
  endpointIds: string[];
}

/**
 * Each URL's concurrency, learnt from how it answers: additive increase, multiplicative decrease
 * (AIMD, as TCP's congestion window). A fast URL that has more due than its limit lets through
 * grows by one per limit's worth of answers; a failed attempt (any answer but a 200, a timeout, a
 * refused connection) or one slower than `slowMs` halves it, once per round of attempts in flight
 * (answers to attempts sent before the cut do not cut again). A URL whose latency climbs past
 * twice its best stops growing: it is queueing what it gets. The latency learnt from is the
 * URL's own: less the time the sender's thread ran late meanwhile (`stalledMs`), which is no sign
 * of the receiver's. The limit stays in `[min, max]`.
 *
 * So a healthy receiver at a provider's pace gets the room its rate needs, and a slow or dead one
 * falls to `min` and holds no more of the worker's slots than that (docs/decisions.md, "Each URL's
 * concurrency follows its answers").
 *
 * @example
 * ```ts
 * const concurrency = new UrlConcurrency();
 * const sentAt = concurrency.now();
 * // ... send the attempt, then:
 * concurrency.answered(url, { ok: true, latencyMs: 3, sentAt, saturated: true });
 * concurrency.limit(url); // 4: it grows to 5 at its fourth fast answer with more due
 * ```
 */
export class UrlConcurrency {
  readonly bounds: Readonly<UrlConcurrencyBounds>;
  private readonly states = new Map<string, UrlState>();
  private readonly clock: () => number;

  constructor(bounds: Partial<UrlConcurrencyBounds> = {}, clock: () => number = () => performance.now()) {
    const b = { ...URL_CONCURRENCY_DEFAULTS, ...definedOnly(bounds) };
    for (const key of ['initial', 'min', 'max'] as const) {
      if (!Number.isInteger(b[key]) || b[key] < 1)
        throw new TypeError(`Invalid per-URL concurrency ${key}: ${b[key]} (a positive integer).`);
    }
    if (!(b.min <= b.initial && b.initial <= b.max))
      throw new TypeError(
        `Invalid per-URL concurrency bounds: min ${b.min}, initial ${b.initial}, max ${b.max} (min <= initial <= max).`,
      );
    if (!(b.slowMs > 0)) throw new TypeError(`Invalid slow answer time: ${b.slowMs} ms (above 0).`);
    this.bounds = Object.freeze(b);
    this.clock = clock;
  }

  /**
   * The per-URL concurrency an option asks for: a `UrlConcurrency` as it is, a number as a fixed
   * limit (`min`, `initial` and `max` all that number), bounds as learnt within them, nothing as
   * the defaults.
   *
   * @example
   * ```ts
   * UrlConcurrency.from(8).limit(url); // 8, whatever the URL's answers
   * ```
   */
  static from(option: number | Partial<UrlConcurrencyBounds> | UrlConcurrency | undefined): UrlConcurrency {
    if (option instanceof UrlConcurrency) return option;
    if (typeof option === 'number') {
      if (!Number.isInteger(option) || option < 1)
        throw new TypeError(`Invalid perUrlConcurrency: ${option} (a positive integer).`);
      return new UrlConcurrency({ initial: option, min: option, max: option });
    }
    return new UrlConcurrency(option);
  }

  /** The clock the answers' `sentAt` is read on. */
  now(): number {
    return this.clock();
  }

  /** Attempts that may be sent at once to `url`, over every instance: an integer in the bounds. */
  limit(url: string): number {
    const state = this.states.get(url);
    return state === undefined ? this.bounds.initial : state.limit;
  }

  /** Learns from one answer of `url` (see the class). */
  answered(url: string, answer: UrlAnswer): void {
    const { min, max, slowMs } = this.bounds;
    // The URL's own time: the sender's thread, busy with other work, read the answer late.
    const latency = Math.max(0, answer.latencyMs - (answer.stalledMs ?? 0));
    let state = this.states.get(url);
    if (state === undefined) {
      state = {
        limit: this.bounds.initial,
        credit: 0,
        latency,
        best: latency,
        cutAt: Number.NEGATIVE_INFINITY,
        endpoints: new Set(),
      };
    } else {
      // Deleted and set again below: the Map's order is the order of use, oldest first.
      this.states.delete(url);
      state.latency += (latency - state.latency) * LATENCY_WEIGHT;
      state.best = Math.min(state.best * BEST_DRIFT, state.latency);
    }
    this.states.set(url, state);
    if (this.states.size > URLS_KEPT) this.states.delete(this.states.keys().next().value as string);
    if (answer.endpointId && state.endpoints.size < 16) state.endpoints.add(answer.endpointId);

    if (!answer.ok || latency > slowMs) {
      // One cut per round: the answers of attempts sent before this cut say nothing new.
      if (answer.sentAt < state.cutAt) return;
      state.limit = Math.max(min, Math.floor(state.limit / 2));
      state.credit = 0;
      state.cutAt = this.clock();
      return;
    }
    if (!answer.saturated || state.limit >= max) return;
    if (state.latency > QUEUE_FACTOR * state.best + QUEUE_SLACK_MS) return;
    if (++state.credit < state.limit) return;
    state.limit++;
    state.credit = 0;
  }

  /** The URLs answered lately, with their limits, for `/metrics` and the dashboard. */
  snapshot(): UrlConcurrencyState[] {
    return [...this.states].map(([url, s]) => ({
      url,
      limit: s.limit,
      latencyMs: s.latency,
      endpointIds: [...s.endpoints],
    }));
  }

  /** The limit of the URL `endpointId` sends to, or undefined while it has not been answered here. */
  limitOfEndpoint(endpointId: string): number | undefined {
    for (const s of this.states.values()) if (s.endpoints.has(endpointId)) return s.limit;
    return undefined;
  }
}

function definedOnly<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
