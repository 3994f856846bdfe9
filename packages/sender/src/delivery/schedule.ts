// The retry schedule (docs/service-interface.md, "Delivery"), as pure functions: the
// worker and the tests compute attempt times the same way, from an injectable random source.

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/** How long the service keeps re-sending an event to one URL: 48 hours after the first attempt. */
export const DELIVERY_WINDOW_MS = 48 * HOUR;

/**
 * Delays after each failed attempt, before jitter: the first attempt is immediate, then 5 s, 1 min,
 * 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, 10 h; a last attempt follows at the deadline.
 */
export const RETRY_DELAYS_MS: readonly number[] = [
  5 * SECOND,
  MINUTE,
  5 * MINUTE,
  30 * MINUTE,
  2 * HOUR,
  5 * HOUR,
  10 * HOUR,
  10 * HOUR,
  10 * HOUR,
];

/** Each delay is scaled by a factor drawn uniformly from [1 - JITTER, 1 + JITTER). */
export const JITTER = 0.2;

/** What the schedule needs to know about a delivery after a failed attempt. */
export interface FailedAttempt {
  /** Attempts made so far, this one included (1 after the first). */
  attempts: number;
  /** When the first attempt started: the 48-hour window counts from it. */
  firstAttemptAt: Date;
  /** When the attempt that just failed started. */
  lastAttemptAt: Date;
  /**
   * The earliest time the receiver asked for (its `Retry-After` on a 429 or 503): the next
   * attempt is no earlier, yet never past the deadline.
   */
  notBefore?: Date | null;
}

/**
 * When to try again after a failed attempt, or `null` when the window is over (the delivery has
 * failed for good). Never later than the deadline, 48 hours after the first attempt; once the
 * scheduled delays are spent, the last attempt is at the deadline itself. With `notBefore` (the
 * receiver's Retry-After), the later of the two times, capped at the deadline: a receiver that
 * asks for more than the window left gets its last attempt at the deadline.
 *
 * @param random - a source of numbers in [0, 1) (default `Math.random`); tests inject their own.
 *
 * @example
 * ```ts
 * const first = new Date('2026-01-01T00:00:00Z');
 * nextAttemptAt({ attempts: 1, firstAttemptAt: first, lastAttemptAt: first }, () => 0.5);
 * // 2026-01-01T00:00:05.000Z: 5 s, jitter factor 1
 * const notBefore = new Date('2026-01-01T00:02:00Z'); // a 503 with Retry-After: 120
 * nextAttemptAt({ attempts: 1, firstAttemptAt: first, lastAttemptAt: first, notBefore }, () => 0.5);
 * // 2026-01-01T00:02:00.000Z
 * ```
 */
export function nextAttemptAt(attempt: FailedAttempt, random: () => number = Math.random): Date | null {
  const deadline = attempt.firstAttemptAt.getTime() + DELIVERY_WINDOW_MS;
  const last = attempt.lastAttemptAt.getTime();
  if (last >= deadline) return null;
  const delay = RETRY_DELAYS_MS[attempt.attempts - 1];
  if (delay === undefined) return new Date(deadline);
  const factor = 1 - JITTER + 2 * JITTER * random();
  const scheduled = last + Math.round(delay * factor);
  const asked = attempt.notBefore?.getTime() ?? Number.NaN;
  return new Date(Math.min(Number.isNaN(asked) ? scheduled : Math.max(scheduled, asked), deadline));
}

/**
 * Every attempt time of a delivery that never succeeds, starting at `firstAttemptAt`, with the
 * jitter of `random`: what the worker does over 48 hours, computed in one call.
 *
 * @example
 * ```ts
 * retrySchedule(new Date(), () => 0.5).length; // 11: the first attempt, 9 retries, the deadline
 * ```
 */
export function retrySchedule(firstAttemptAt: Date, random: () => number = Math.random): Date[] {
  const times = [firstAttemptAt];
  for (;;) {
    const next = nextAttemptAt(
      { attempts: times.length, firstAttemptAt, lastAttemptAt: times[times.length - 1] as Date },
      random,
    );
    if (next === null) return times;
    times.push(next);
  }
}
