/** Local retries of a failing handler, within one receiver process. */
export interface RetryOptions {
  /** Attempts in all, the first included (default 3; 1 means no retry). */
  attempts?: number;
  /** Delay before the first retry, in ms (default 200). */
  minDelayMs?: number;
  /** Longest delay between attempts, in ms (default 10,000). */
  maxDelayMs?: number;
  /** Growth of the delay from one retry to the next (default 2). */
  factor?: number;
}

/** The defaults of `retry`: 3 attempts, 200 ms doubling to at most 10 s. */
export const DEFAULT_RETRY: Required<RetryOptions> = {
  attempts: 3,
  minDelayMs: 200,
  maxDelayMs: 10_000,
  factor: 2,
};

/**
 * Delay before retry number `retry` (1 for the first retry): exponential, capped, with "equal
 * jitter" (between half and all of the exponential delay), so that instances that failed
 * together do not retry in step. Pure: the random source is a parameter.
 *
 * @example
 * ```ts
 * retryDelay(1, DEFAULT_RETRY, () => 0.5); // 150
 * ```
 */
export function retryDelay(
  retry: number,
  options: Required<RetryOptions>,
  random: () => number = Math.random,
): number {
  const exponential = Math.min(
    options.maxDelayMs,
    options.minDelayMs * options.factor ** Math.max(0, retry - 1),
  );
  return Math.round(exponential / 2 + (random() * exponential) / 2);
}

/** Fills defaults and checks values; a TypeError names the bad one. */
export function resolveRetry(options: RetryOptions | undefined): Required<RetryOptions> {
  const merged = { ...DEFAULT_RETRY, ...options };
  if (!Number.isInteger(merged.attempts) || merged.attempts < 1) {
    throw new TypeError(`Invalid retry.attempts: ${merged.attempts} (expected an integer of at least 1).`);
  }
  for (const name of ['minDelayMs', 'maxDelayMs', 'factor'] as const) {
    if (!Number.isFinite(merged[name]) || merged[name] < 0) {
      throw new TypeError(`Invalid retry.${name}: ${merged[name]} (expected a non-negative number).`);
    }
  }
  return merged;
}
