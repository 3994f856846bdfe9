import { withStoreTimeout } from '@payhook/core';

/**
 * The error of a store statement that did not answer within `commandTimeoutMs` (a connection's
 * wait included); the receiver reports it to `onError` (phase `store`) and answers 503
 * `store_unavailable`.
 *
 * @example
 * ```ts
 * receiver.onError((error) => {
 *   if (error instanceof PostgresTimeoutError) metrics.increment('postgres.timeouts');
 * });
 * ```
 */
export class PostgresTimeoutError extends Error {
  override readonly name = 'PostgresTimeoutError';
  constructor(statement: string, ms: number) {
    super(`PostgreSQL did not answer ${statement} within ${ms} ms.`);
  }
}

/** Runs `run` under the store's timeout (`withStoreTimeout`), failing with a {@link PostgresTimeoutError}. */
export function withTimeout<T>(name: string, ms: number, run: () => Promise<T>): Promise<T> {
  return withStoreTimeout(ms, run, () => new PostgresTimeoutError(name, ms));
}
