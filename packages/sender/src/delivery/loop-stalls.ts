import { performance } from 'node:perf_hooks';
import { LOOP_TICK_MS } from './tuning.js';

/** How late this thread's event loop has run so far (see {@link measureLoopStalls}). */
export interface LoopStalls {
  /** The loop's lateness so far, in ms: what a stopwatch around any wait should not blame on it. */
  total(): number;
  /** Stops measuring (the tick's timer); `total()` keeps its last value. */
  stop(): void;
}

/**
 * Measures how late this thread's event loop runs: a timer due every {@link LOOP_TICK_MS} notes by
 * how much it fired late, and {@link LoopStalls.total} adds those delays up, with the one still
 * under way. A wait timed on this thread (an HTTP exchange) includes the time the thread spent on
 * other work before it could read the answer: the API's requests, the answers of the database to
 * parse (and, on a busy machine, the time the scheduler gave elsewhere). The delivery worker
 * subtracts this from an attempt's latency before a URL's concurrency learns from it, so that its
 * own busy moments are not taken for a receiver queueing what it gets.
 *
 * @example
 * ```ts
 * const stalls = measureLoopStalls();
 * const before = stalls.total();
 * await exchange();
 * const ownDelay = stalls.total() - before;
 * ```
 */
export function measureLoopStalls(clock: () => number = () => performance.now()): LoopStalls {
  let total = 0;
  let last = clock();
  let stopped = false;
  const underWay = () => (stopped ? 0 : Math.max(0, clock() - last - LOOP_TICK_MS));
  const timer = setInterval(() => {
    total += underWay();
    last = clock();
  }, LOOP_TICK_MS);
  timer.unref();
  return {
    total: () => total + underWay(),
    stop() {
      total += underWay();
      stopped = true;
      clearInterval(timer);
    },
  };
}
