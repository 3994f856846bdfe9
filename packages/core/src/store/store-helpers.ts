// What every store package needs beside the contract of types.ts: its option checks and the timeout
// each of its commands runs under. The memory store, @payhook/redis and @payhook/postgres use them.

/**
 * Checks a store's option in milliseconds and returns it: a positive integer (`'integer'`) or a
 * positive finite number (`'number'`), else a TypeError that names the option, its value and what
 * was expected, such as `Invalid retentionMs: 0 (expected a positive integer of milliseconds).`
 *
 * @example
 * ```ts
 * const retentionMs = checkMilliseconds('retentionMs', options.retentionMs ?? DEFAULT_RETENTION_MS, 'integer');
 * const timeoutMs = checkMilliseconds('commandTimeoutMs', options.commandTimeoutMs ?? 1000, 'number');
 * ```
 */
export function checkMilliseconds(name: string, value: number, kind: 'integer' | 'number'): number {
  if (!(kind === 'integer' ? Number.isInteger(value) : Number.isFinite(value)) || value <= 0) {
    throw new TypeError(`Invalid ${name}: ${value} (expected a positive ${kind} of milliseconds).`);
  }
  return value;
}

/**
 * Runs one command of a store under a timeout, so that a store never hangs a request: settles as
 * `run()` does, or rejects with `timeoutError()` once `ms` have passed first (the timer is cleared
 * as soon as `run()` settles). The receiver reports such an error to `onError` (phase `store`) and
 * answers 503 `store_unavailable`.
 *
 * @example
 * ```ts
 * const rows = await withStoreTimeout(timeoutMs, () => db.query(sql), () => new MyStoreTimeoutError('claim', timeoutMs));
 * ```
 */
export function withStoreTimeout<T>(
  ms: number,
  run: () => Promise<T>,
  timeoutError: () => Error,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(timeoutError()), ms);
    run().then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
