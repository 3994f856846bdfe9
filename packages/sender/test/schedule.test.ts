import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DELIVERY_WINDOW_MS, nextAttemptAt, RETRY_DELAYS_MS, retrySchedule } from '../src/index.js';

const t0 = new Date('2026-01-01T00:00:00.000Z');
const S = 1000;
const M = 60 * S;
const H = 60 * M;

describe('the retry schedule', () => {
  it('waits the design delays after each attempt when the jitter factor is 1', () => {
    const times = retrySchedule(t0, () => 0.5).map((d) => d.getTime() - t0.getTime());
    const gaps = times.slice(1).map((t, i) => t - (times[i] as number));
    expect(gaps).toEqual([5 * S, M, 5 * M, 30 * M, 2 * H, 5 * H, 10 * H, 10 * H, 10 * H, gaps[9]]);
    // The first attempt, nine retries, and the last attempt at the deadline, 48 h after the first.
    expect(times).toHaveLength(11);
    expect(times.at(-1)).toBe(48 * H);
    expect(RETRY_DELAYS_MS).toHaveLength(9);
  });

  it('keeps every delay within 20% of its nominal value', () => {
    const low = retrySchedule(t0, () => 0);
    const high = retrySchedule(t0, () => 0.999999);
    expect(low[1]?.getTime()).toBe(t0.getTime() + 4 * S);
    expect(Math.round(((high[1]?.getTime() ?? 0) - t0.getTime()) / 10) * 10).toBe(6 * S);
    expect((low[6]?.getTime() ?? 0) - (low[5]?.getTime() ?? 0)).toBe(0.8 * 5 * H);
  });

  it('never schedules past the deadline, and ends after an attempt at or past it', () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: 0, max: 0.9999, noNaN: true }), { minLength: 20, maxLength: 20 }),
        (draws) => {
          let i = 0;
          const times = retrySchedule(t0, () => draws[i++ % draws.length] as number);
          const deadline = t0.getTime() + DELIVERY_WINDOW_MS;
          for (let k = 1; k < times.length; k++) {
            expect(times[k]?.getTime()).toBeGreaterThan(times[k - 1]?.getTime() as number);
            expect(times[k]?.getTime()).toBeLessThanOrEqual(deadline);
          }
          expect(times.at(-1)?.getTime()).toBe(deadline);
        },
      ),
    );
  });

  it('clamps a late retry to the deadline, and stops once an attempt was made at or after it', () => {
    const late = new Date(t0.getTime() + 47.9 * H);
    expect(nextAttemptAt({ attempts: 9, firstAttemptAt: t0, lastAttemptAt: late }, () => 0.5)).toEqual(
      new Date(t0.getTime() + 48 * H),
    );
    const atDeadline = new Date(t0.getTime() + 48 * H);
    expect(nextAttemptAt({ attempts: 11, firstAttemptAt: t0, lastAttemptAt: atDeadline })).toBeNull();
    // A worker that was down past the deadline makes one last attempt, then no more.
    const afterDeadline = new Date(t0.getTime() + 60 * H);
    expect(nextAttemptAt({ attempts: 3, firstAttemptAt: t0, lastAttemptAt: afterDeadline })).toBeNull();
  });

  it('draws the jitter from the injected source, once per retry', () => {
    let calls = 0;
    retrySchedule(t0, () => {
      calls++;
      return 0.5;
    });
    expect(calls).toBe(9);
  });
});
