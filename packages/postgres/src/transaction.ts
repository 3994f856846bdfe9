// Handlers' transactions: one per attempt, from the store's pool, committed with the event's done
// mark. At most `pool max - 2` at once, so that claims always find a connection.
import type { HandlerContext, OrderedCompletion } from '@payhook/core';
import type { Pool, PoolClient, QueryResult, QueryResultRow } from 'pg';
import { withTimeout } from './timeout.js';

/** What the transaction runner needs from its store. */
export interface TransactionRunnerOptions {
  pool: Pool;
  /**
   * What opens the transaction on `client`: `BEGIN`, after whatever the commit needs prepared on a
   * connection that lacks it. `opened` is called once it ran.
   */
  opening(client: PoolClient): string;
  opened(client: PoolClient): void;
  /**
   * Marks the event done on the transaction's client and commits (with per-object order, the rank
   * raised and the lock freed too); rolls back and answers false when `owner` no longer held `key`.
   */
  commitDone(
    client: PoolClient,
    key: string,
    owner: string,
    order: OrderedCompletion | undefined,
  ): Promise<boolean>;
  timeoutMs: number;
  /** Waits until the inbox exists. */
  ready(): Promise<void>;
}

/** A connection of an attempt's slot; `end` gives both back (the connection closed if `failed`). */
interface Attempt {
  client: PoolClient;
  end(failed: boolean): void;
}

/**
 * The store's `runInTransaction` (see `IdempotencyStore.runInTransaction` in @payhook/core), and
 * `ahead`, for a statement sent on an attempt's connection just before the attempt (the order's
 * lock), in the round trip that opens the attempt's transaction.
 */
export function createTransactionRunner(options: TransactionRunnerOptions) {
  const { pool, commitDone, timeoutMs } = options;
  const max = (pool as Pool & { options?: { max?: number } }).options?.max ?? 10;
  const slots = createSlots(Math.max(1, max - 2));
  /** Connections inside the BEGIN of an event's next attempt, by key and owner (see `ahead`). */
  const opened = new Map<string, Attempt>();

  async function acquire(): Promise<Attempt> {
    const release = await slots.take();
    let client: PoolClient;
    try {
      client = await connectWithin(pool, timeoutMs);
    } catch (error) {
      release();
      throw error;
    }
    // A connection that breaks mid-transaction emits an error besides failing its statements: a
    // listener keeps it from crashing the process, and the connection is closed on release.
    let broken = false;
    const onBroken = () => {
      broken = true;
    };
    client.on('error', onBroken);
    return {
      client,
      end(failed) {
        client.off('error', onBroken);
        client.release(broken || failed);
        release();
      },
    };
  }

  /** Ends an attempt's transaction that no attempt took, and gives its connection back. */
  function rollBack(attempt: Attempt): void {
    withTimeout('ROLLBACK', timeoutMs, () => attempt.client.query('ROLLBACK')).then(
      () => attempt.end(false),
      () => attempt.end(true),
    );
  }

  async function runInTransaction(
    key: string,
    owner: string,
    run: (transaction: unknown) => unknown,
    order?: OrderedCompletion,
  ): Promise<boolean> {
    const id = `${key}\n${owner}`;
    const handed = opened.get(id);
    opened.delete(id);
    await options.ready();
    const attempt = handed ?? (await acquire());
    // A connection whose attempt failed is closed, not returned to the pool: a handler that timed
    // out may still be sending statements on it, and a commit that timed out may still land.
    let failed = false;
    try {
      const { client } = attempt;
      if (handed === undefined) {
        await withTimeout('BEGIN', timeoutMs, () => client.query(options.opening(client)));
        options.opened(client);
      }
      await run(client);
      return await withTimeout('done mark and COMMIT', timeoutMs, () =>
        commitDone(client, key, owner, order),
      );
    } catch (error) {
      failed = true;
      throw error;
    } finally {
      attempt.end(failed);
    }
  }

  /**
   * Sends `statements` on a connection of an attempt's slot, with the BEGIN of the event's next
   * attempt after them, in one round trip, and answers their results. If `keep` says the attempt
   * follows (the order's lock was taken), the connection waits, inside that BEGIN, for the
   * attempt's `runInTransaction` by `key` and `owner`, which then sends no BEGIN of its own. One
   * that no attempt takes within this turn of the event loop (the event's lease was lost, say) is
   * rolled back and given back, as is one that `keep` refuses. The results of `statements` must not
   * end a transaction they did not open.
   */
  async function ahead<R>(
    key: string,
    owner: string,
    statements: (client: PoolClient) => string,
    keep: (results: QueryResult<R & QueryResultRow>[]) => boolean,
  ): Promise<QueryResult<R & QueryResultRow>[]> {
    const attempt = await acquire();
    const { client } = attempt;
    let results: QueryResult<R & QueryResultRow>[];
    try {
      const sent = `${statements(client)};\n${options.opening(client)}`;
      results = (await withTimeout('lock', timeoutMs, () => client.query(sent))) as unknown as QueryResult<
        R & QueryResultRow
      >[];
    } catch (error) {
      attempt.end(true);
      throw error;
    }
    options.opened(client);
    if (!keep(results)) {
      rollBack(attempt);
      return results;
    }
    const id = `${key}\n${owner}`;
    const previous = opened.get(id);
    if (previous) rollBack(previous);
    opened.set(id, attempt);
    setImmediate(() => {
      if (opened.get(id) !== attempt) return;
      opened.delete(id);
      rollBack(attempt);
    });
    return results;
  }

  return { runInTransaction, ahead };
}

/** A connection of `pool` within `ms`; one that comes later is given back to the pool. */
export function connectWithin(pool: Pool, ms: number): Promise<PoolClient> {
  const connecting = pool.connect();
  return withTimeout('connect', ms, () => connecting).catch((error: unknown) => {
    connecting.then(
      (late) => late.release(),
      () => {},
    );
    throw error;
  });
}

/** A counting semaphore: `take` resolves with a release once fewer than `size` are taken. */
function createSlots(size: number) {
  let free = size;
  const waiting: (() => void)[] = [];
  const release = () => {
    const next = waiting.shift();
    if (next) next();
    else free++;
  };
  return {
    take(): Promise<() => void> {
      if (free > 0) {
        free--;
        return Promise.resolve(release);
      }
      return new Promise((resolve) => waiting.push(() => resolve(release)));
    },
  };
}

/**
 * The open transaction of a handler's attempt, typed: a `pg` client of the store's pool inside
 * `BEGIN`. What the handler writes through it commits in the same transaction as the event's done
 * mark, or not at all. Throws a TypeError when the receiver's store is not a PostgreSQL store.
 *
 * @example
 * ```ts
 * receiver.on('payment.session.succeeded', async (event, context) => {
 *   const db = pgTransaction(context);
 *   await db.query('UPDATE orders SET paid = true WHERE reference = $1', [event.data.reference]);
 * });
 * ```
 */
export function pgTransaction(context: HandlerContext): PoolClient {
  const transaction = context.transaction as PoolClient | undefined;
  if (transaction === undefined || typeof transaction.query !== 'function') {
    throw new TypeError(
      "context.transaction is not a PostgreSQL transaction: create the receiver with @payhook/postgres's store (createPostgresStore) to run handlers in one.",
    );
  }
  return transaction;
}

/** A connection of a {@link TransactionPool}: the transaction's client, released by the store alone. */
export interface TransactionConnection {
  /** The transaction's `query`. */
  query: PoolClient['query'];
  /** Does nothing: the store releases the client once the transaction ends. */
  release(): void;
}

/** A pool that hands out one connection, for libraries that take a pool (see {@link transactionPool}). */
export interface TransactionPool {
  /** The attempt's transaction: its client's `query`, and a `release` that does nothing. */
  connect(): Promise<TransactionConnection>;
  /** Does nothing: the store ends the transaction. */
  end(): Promise<void>;
}

/**
 * The attempt's transaction shaped as a pool, for query builders that take a pool rather than a
 * client, Kysely's `PostgresDialect` first: each connection it hands out is the transaction's own
 * client, and releasing it leaves the transaction open, for the store to commit with the done mark.
 * Do not open a transaction of the builder's own on it (`db.transaction()`): the attempt already
 * runs in one.
 *
 * @example
 * ```ts
 * import { Kysely, PostgresDialect } from 'kysely';
 * receiver.on('payment.session.succeeded', async (event, context) => {
 *   const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: transactionPool(context) }) });
 *   await db.updateTable('orders').set({ paid: true }).where('reference', '=', event.data.reference).execute();
 * });
 * ```
 */
export function transactionPool(context: HandlerContext): TransactionPool {
  const client = pgTransaction(context);
  const view: TransactionConnection = {
    query: client.query.bind(client) as PoolClient['query'],
    release: () => {},
  };
  return {
    connect: async () => view,
    end: async () => {},
  };
}
