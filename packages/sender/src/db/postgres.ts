import type { PostgresCursor, PostgresPool, PostgresPoolClient, PostgresQueryResult } from 'kysely';
import pg from 'pg';
import { type DatabaseHealth, DatabaseTimeoutError } from './health.js';
import { marksWake, type WakeSignal } from './wake.js';

/**
 * How long the sender waits on PostgreSQL before it answers 503 rather than wait with it
 * (docs/decisions.md, "A database outage is an answer").
 */
export interface PostgresTimeouts {
  /** For a connection from a pool, a new one's handshake included (default 2,000 ms). */
  acquireTimeoutMs: number;
  /**
   * For one statement: the server cancels it past this (`statement_timeout`), and the sender cuts
   * the connection of a statement still unanswered half a second later (a frozen server or a
   * partition answers nothing, not even the cancel). Default 2,500 ms.
   */
  statementTimeoutMs: number;
}

/** The defaults of {@link PostgresTimeouts}: with both, an API request has its answer within 5 s. */
export const DEFAULT_TIMEOUTS: PostgresTimeouts = { acquireTimeoutMs: 2000, statementTimeoutMs: 2500 };

/** A statement still unanswered this long after the server should have cancelled it is cut. */
const CUT_AFTER_MS = 500;

/**
 * Put at the start of a statement's text, this comment makes it a named prepared statement on
 * PostgreSQL: parsed and planned once per connection rather than at every execution, which is
 * most of the server's work for a statement of several data-modifying CTEs run on every request.
 * For statements of a few fixed texts (values as parameters), run often. On PGlite, a comment.
 *
 * @example
 * ```ts
 * await db.executeQuery(sql`${sql.raw(PREPARE)}with ... select ...`.compile(db));
 * ```
 */
export const PREPARE = '/* payhook:prepare */ ';

/** Names of the marked statement texts seen (the same text, the same name, on every connection). */
const preparedNames = new Map<string, string>();
/** Past this many texts, marked statements run unnamed: a bound on what each connection keeps. */
const MAX_PREPARED = 32;

/** The socket under a `pg` client, cut when a statement gets no answer. */
function cut(client: pg.ClientBase): void {
  (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
}

/**
 * A `pg` pool whose connections never end the process on a lost connection (the error a client
 * emits while checked out is handled: the next statement on it fails and the pool drops it).
 */
export function createPool(config: pg.PoolConfig, timeouts: PostgresTimeouts): pg.Pool {
  const pool = new pg.Pool({
    ...config,
    connectionTimeoutMillis: timeouts.acquireTimeoutMs,
    statement_timeout: timeouts.statementTimeoutMs,
    keepAlive: true,
  });
  // An idle connection the server dropped is replaced on the next query; a checked-out one fails
  // its next statement. Without these listeners, either error event would end the process.
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  return pool;
}

/**
 * A pool for Kysely whose connections run statements marked with `PREPARE` as named statements,
 * report connection failures to `health`, and cut a connection whose statement outlives the
 * statement timeout (so a frozen server costs a request seconds, not the whole outage).
 */
export function kyselyPool(
  pool: pg.Pool,
  timeouts: PostgresTimeouts,
  health: DatabaseHealth,
  wake?: WakeSignal,
): PostgresPool {
  const clients = new WeakMap<pg.PoolClient, PostgresPoolClient>();
  const limitMs = timeouts.statementTimeoutMs + CUT_AFTER_MS;
  return {
    async connect() {
      let client: pg.PoolClient;
      try {
        client = await pool.connect();
      } catch (error) {
        health.report(error);
        throw error;
      }
      let wrapped = clients.get(client);
      if (wrapped === undefined) {
        const tracker = wake?.tracker();
        const run = (config: pg.QueryConfig | string, values?: unknown[]): Promise<pg.QueryResult> => {
          const text = typeof config === 'string' ? config : config.text;
          tracker?.before(text);
          let timer: NodeJS.Timeout | undefined;
          const answered = client.query(config as pg.QueryConfig, values);
          const timedOut = new Promise<never>((_, reject) => {
            timer = setTimeout(() => {
              cut(client);
              reject(new DatabaseTimeoutError(`The database did not answer within ${limitMs} ms.`));
            }, limitMs);
          });
          // The statement's own failure, once the connection is cut, is the timeout's.
          answered.catch(() => {});
          return Promise.race([answered, timedOut])
            .then(
              (result) => {
                tracker?.after(text, marksWake(result.rows));
                return result;
              },
              (error: unknown) => {
                health.report(error);
                throw error;
              },
            )
            .finally(() => clearTimeout(timer));
        };
        function query<R>(sql: string, parameters: readonly unknown[]): Promise<PostgresQueryResult<R>>;
        function query<R>(cursor: PostgresCursor<R>): PostgresCursor<R>;
        function query(text: string | PostgresCursor<unknown>, values?: readonly unknown[]): unknown {
          if (typeof text !== 'string') return client.query(text as unknown as pg.Submittable);
          if (text.startsWith(PREPARE)) {
            let name = preparedNames.get(text);
            if (name === undefined && preparedNames.size < MAX_PREPARED) {
              name = `payhook_${preparedNames.size + 1}`;
              preparedNames.set(text, name);
            }
            if (name !== undefined) return run({ name, text, values: values as unknown[] });
          }
          return run(text, values as unknown[]);
        }
        wrapped = { query, release: () => client.release() };
        clients.set(client, wrapped);
      }
      return wrapped;
    },
    end: () => pool.end(),
  };
}

/**
 * Runs `select 1` on a connection of its own within the timeouts: what {@link DatabaseHealth}
 * checks, so that the answer never depends on a pooled connection the server dropped.
 */
export async function probe(config: pg.ClientConfig, timeouts: PostgresTimeouts): Promise<void> {
  const client = new pg.Client({
    ...config,
    connectionTimeoutMillis: timeouts.acquireTimeoutMs,
    statement_timeout: timeouts.statementTimeoutMs,
  });
  client.on('error', () => {});
  let timer: NodeJS.Timeout | undefined;
  try {
    await client.connect();
    await Promise.race([
      client.query('select 1'),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          cut(client);
          reject(new DatabaseTimeoutError('The database did not answer select 1.'));
        }, timeouts.statementTimeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
    cut(client);
    client.end().catch(() => {});
  }
}

/** How often a listening connection is asked `select 1`, so that a silently dead one is replaced. */
const LISTEN_CHECK_MS = 10_000;

/**
 * LISTEN on a connection of its own, opened again with a backoff (250 ms doubling to 5 s) whenever
 * it drops or stops answering. Every (re)open calls `onNotify` once: wake-ups sent while no one
 * listened are lost, so the listener looks for due work at once.
 */
export async function listenOnPostgres(
  config: pg.ClientConfig,
  timeouts: PostgresTimeouts,
  channel: string,
  onNotify: (payload?: string) => void,
): Promise<() => Promise<void>> {
  let stopped = false;
  let client: pg.Client | undefined;
  let retry: NodeJS.Timeout | undefined;
  let check: NodeJS.Timeout | undefined;
  let backoff = 250;
  const drop = (which: pg.Client) => {
    cut(which);
    which.end().catch(() => {});
    if (client === which) reopen();
  };
  const open = async () => {
    const next = new pg.Client({
      ...config,
      connectionTimeoutMillis: timeouts.acquireTimeoutMs,
      keepAlive: true,
    });
    next.on('notification', (message) => {
      if (message.channel === channel) onNotify(message.payload);
    });
    next.on('error', () => drop(next));
    next.on('end', () => {
      if (client === next) reopen();
    });
    try {
      await next.connect();
      await next.query(`listen ${pg.escapeIdentifier(channel)}`);
    } catch (error) {
      cut(next);
      next.end().catch(() => {});
      throw error;
    }
    if (stopped) {
      await next.end().catch(() => {});
      return;
    }
    client = next;
    backoff = 250;
    clearInterval(check);
    check = setInterval(() => {
      let timer: NodeJS.Timeout | undefined;
      Promise.race([
        next.query('select 1'),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new DatabaseTimeoutError('no answer')),
            timeouts.statementTimeoutMs,
          );
        }),
      ])
        .catch(() => drop(next))
        .finally(() => clearTimeout(timer));
    }, LISTEN_CHECK_MS);
    check.unref();
    onNotify();
  };
  const reopen = () => {
    client = undefined;
    clearInterval(check);
    if (stopped || retry) return;
    const wait = Math.round(backoff * (0.8 + 0.4 * Math.random()));
    backoff = Math.min(5000, backoff * 2);
    retry = setTimeout(() => {
      retry = undefined;
      open().catch(reopen);
    }, wait);
    retry.unref();
  };
  await open();
  return async () => {
    stopped = true;
    clearTimeout(retry);
    clearInterval(check);
    await client?.end().catch(() => {});
  };
}
