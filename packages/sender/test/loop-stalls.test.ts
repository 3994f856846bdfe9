import { afterEach, describe, expect, it, vi } from 'vitest';
import { measureLoopStalls } from '../src/delivery/loop-stalls.js';
import { LOOP_TICK_MS } from '../src/delivery/tuning.js';

/** Holds this thread for `ms`, as a long synchronous statement of PGlite does. */
function hold(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {}
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('measureLoopStalls', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('adds up how late its tick fired, the lateness under way included, each stall once', () => {
    vi.useFakeTimers();
    let t = 0;
    const stalls = measureLoopStalls(() => t);
    // On time: nothing.
    t += LOOP_TICK_MS;
    vi.advanceTimersByTime(LOOP_TICK_MS);
    expect(stalls.total()).toBe(0);
    // The thread held for 130 ms: the tick due 10 ms in comes 120 ms late, counted while under way...
    t += 130;
    expect(stalls.total()).toBe(120);
    // ...and the same once the late tick has run, not twice.
    vi.advanceTimersByTime(LOOP_TICK_MS);
    expect(stalls.total()).toBe(120);
    t += LOOP_TICK_MS;
    vi.advanceTimersByTime(LOOP_TICK_MS);
    expect(stalls.total()).toBe(120);
    // Stopped: the total keeps what it had, lateness under way included, and grows no more.
    t += 40;
    stalls.stop();
    expect(stalls.total()).toBe(150);
    t += 1000;
    vi.advanceTimersByTime(1000);
    expect(stalls.total()).toBe(150);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('sees a real stall of this thread', async () => {
    const stalls = measureLoopStalls();
    try {
      await sleep(30);
      const before = stalls.total();
      hold(120);
      // The tick due during the hold is late by the hold, less at most one tick.
      expect(stalls.total() - before).toBeGreaterThanOrEqual(120 - 2 * LOOP_TICK_MS);
      await sleep(30);
      expect(stalls.total() - before).toBeGreaterThanOrEqual(120 - 2 * LOOP_TICK_MS);
    } finally {
      stalls.stop();
    }
  });
});
