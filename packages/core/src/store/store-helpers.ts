// What every store package needs beside the contract of types.ts: its option checks and the timeout
// each of its commands runs under. The memory store, @payhook/redis and @payhook/postgres use them.

/** How long stores keep finished events by default: 7 days. */
export const DEFAULT_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;

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

/** The times a store backed by a server takes, as its options name them. */
export interface StoreTimeOptions {
  /** How long a done or failed record is kept, in ms (default `DEFAULT_RETENTION_MS`). */
  retentionMs?: number;
  /** The lease the store suggests to its receivers, in ms. */
  leaseMs?: number;
  /** How long one command may take before the receiver answers 503, in ms. */
  commandTimeoutMs?: number;
}

/**
 * Checks the times of a store backed by a server ({@link StoreTimeOptions}, each as
 * {@link checkMilliseconds}: retention a positive integer, the command timeout a positive number,
 * the lease as `leaseKind` says) and returns the retention and the command timeout, defaults
 * filled in. The Redis and PostgreSQL stores take these three options alike.
 *
 * @example
 * ```ts
 * const { retentionMs, timeoutMs } = checkStoreTimes(options, { commandTimeoutMs: 1000, leaseKind: 'number' });
 * ```
 */
export function checkStoreTimes(
  options: StoreTimeOptions,
  defaults: { commandTimeoutMs: number; leaseKind: 'integer' | 'number' },
): { retentionMs: number; timeoutMs: number } {
  const retentionMs = checkMilliseconds(
    'retentionMs',
    options.retentionMs ?? DEFAULT_RETENTION_MS,
    'integer',
  );
  if (options.leaseMs !== undefined) checkMilliseconds('leaseMs', options.leaseMs, defaults.leaseKind);
  const timeoutMs = checkMilliseconds(
    'commandTimeoutMs',
    options.commandTimeoutMs ?? defaults.commandTimeoutMs,
    'number',
  );
  return { retentionMs, timeoutMs };
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
