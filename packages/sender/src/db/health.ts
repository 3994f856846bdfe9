/**
 * Whether the database answers, as every part of the sender sees it: `up`, or `down` from the
 * moment a fresh connection could not run `select 1` until one can again. Failed statements are
 * reported here; a failure of the connection kind (refused, reset, terminated, timed out) has a
 * fresh connection checked, so one stale connection dropped by a restart does not make the whole
 * database `down` (docs/decisions.md, "A database outage is an answer").
 */
export interface DatabaseHealth {
  readonly state: 'up' | 'down';
  /** What failed, while `down`. */
  readonly reason: string | undefined;
  /** Reports a failed statement or connection: a connection-kind failure has the database checked. */
  report(error: unknown): void;
  /** Seconds a client should wait before trying again while `down` (the next check, at least 1). */
  retryAfterSeconds(): number;
  /** Calls `listener` at every change: `down` with its reason, `up` with how long it was down. */
  onChange(listener: (change: HealthChange) => void): () => void;
  /** Stops checking (at close). */
  close(): void;
}

/** A change of {@link DatabaseHealth}'s state. */
export type HealthChange = { state: 'down'; reason: string } | { state: 'up'; downForMs: number };

/** Node's codes of a connection that could not be made or was lost. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ECONNABORTED',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/**
 * PostgreSQL's SQLSTATEs of a server that cannot serve now: class 08 (connection exception),
 * `57P01`-`57P03` (terminated by an administrator, crash shutdown, cannot connect now: starting or
 * stopping), `53300` (too many connections), `57014` (a statement cancelled, here by the statement
 * timeout: the server is too slow to answer).
 */
const UNAVAILABLE_STATES = /^(?:08|57P0[123]$|53300$|57014$)/;

/** The messages of `pg`'s own connection failures (it gives them no code). */
const PG_CONNECTION_MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|connection timeout|not queryable|Client was closed/i;

/** A statement of the sender that got no answer within its time: the connection is cut. */
export class DatabaseTimeoutError extends Error {
  override readonly name = 'DatabaseTimeoutError';
  readonly code = 'DATABASE_TIMEOUT';
}

/**
 * True when `error` says the database could not be reached or could not answer in time, as
 * opposed to a statement it refused (a constraint, a syntax error): the API answers the first 503
 * `database_unavailable` and the second 500.
 *
 * @example
 * ```ts
 * if (isDatabaseUnavailable(error)) reply.code(503);
 * ```
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  for (let e = error, depth = 0; e && typeof e === 'object' && depth < 4; depth++) {
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (e instanceof DatabaseTimeoutError) return true;
    if (typeof code === 'string' && (NETWORK_CODES.has(code) || UNAVAILABLE_STATES.test(code))) return true;
    // The embedded PGlite failed, or its thread is gone (`PGliteThreadError`), or it is too far
    // behind to take a statement in time (`PGliteBusyError`).
    if (code === 'PGLITE_UNAVAILABLE' || code === 'PGLITE_BUSY') return true;
    if (typeof message === 'string' && PG_CONNECTION_MESSAGES.test(message)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** Whether a statement failed because the database is away: not worth a log line of its own. */
export function isConnectionLost(error: unknown): boolean {
  return isDatabaseUnavailable(error) && (error as { code?: unknown }).code !== '57014';
}

/** Options of {@link createDatabaseHealth}. */
export interface DatabaseHealthOptions {
  /** Runs `select 1` on a fresh connection, failing within its own time limit. */
  probe: () => Promise<void>;
  /** The first wait between checks while down (default 250 ms); doubled up to `maxBackoffMs`. */
  minBackoffMs?: number;
  /** The longest wait between checks while down (default 2 s). */
  maxBackoffMs?: number;
}

/**
 * Creates the health of a PostgreSQL database, checked by `probe` when a connection fails and, while
 * down, again and again with a backoff (with jitter) until it answers.
 *
 * @example
 * ```ts
 * const health = createDatabaseHealth({ probe: () => pingOnFreshConnection(url) });
 * health.onChange((change) => log.warn(change, 'database'));
 * ```
 */
export function createDatabaseHealth(options: DatabaseHealthOptions): DatabaseHealth {
  const minBackoff = options.minBackoffMs ?? 250;
  const maxBackoff = options.maxBackoffMs ?? 2000;
  let state: 'up' | 'down' = 'up';
  let reason: string | undefined;
  let downSince = 0;
  let checking = false;
  let closed = false;
  let backoff = minBackoff;
  let nextCheckAt = 0;
  let timer: NodeJS.Timeout | undefined;
  const listeners = new Set<(change: HealthChange) => void>();

  const emit = (change: HealthChange) => {
    for (const listener of listeners) listener(change);
  };

  async function check(): Promise<void> {
    if (checking || closed) return;
    checking = true;
    let failure: unknown;
    try {
      await options.probe();
    } catch (error) {
      failure = error;
    } finally {
      checking = false;
    }
    if (closed) return;
    if (failure === undefined) {
      backoff = minBackoff;
      if (state === 'down') {
        state = 'up';
        reason = undefined;
        emit({ state: 'up', downForMs: Date.now() - downSince });
      }
      return;
    }
    if (state === 'up') {
      state = 'down';
      downSince = Date.now();
      reason = (failure as Error)?.message ?? String(failure);
      emit({ state: 'down', reason });
    }
    const wait = Math.round(backoff * (0.8 + 0.4 * Math.random()));
    backoff = Math.min(maxBackoff, backoff * 2);
    nextCheckAt = Date.now() + wait;
    timer = setTimeout(() => void check(), wait);
    timer.unref();
  }

  return {
    get state() {
      return state;
    },
    get reason() {
      return reason;
    },
    report(error) {
      // While down, the checks under way decide when it is back; a statement failing says nothing new.
      if (state === 'up' && isConnectionLost(error)) void check();
    },
    retryAfterSeconds: () => Math.max(1, Math.ceil((nextCheckAt - Date.now()) / 1000)),
    onChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    close() {
      closed = true;
      clearTimeout(timer);
    },
  };
}

/** The health of a database that cannot be away: PGlite runs in this process. */
export const ALWAYS_UP: DatabaseHealth = {
  state: 'up',
  reason: undefined,
  report() {},
  retryAfterSeconds: () => 1,
  onChange: () => () => {},
  close() {},
};

/**
 * The health of an embedded database that cannot come back once it fails (PGlite on its thread):
 * up until `failures` reports a failure, down for good after (the sender must be restarted).
 */
export function oneWayHealth(failures: (listener: (reason: string) => void) => () => void): DatabaseHealth {
  let reason: string | undefined;
  const listeners = new Set<(change: HealthChange) => void>();
  const stop = failures((why) => {
    reason = `${why}; restart the sender`;
    for (const listener of listeners) listener({ state: 'down', reason });
  });
  return {
    get state() {
      return reason === undefined ? 'up' : 'down';
    },
    get reason() {
      return reason;
    },
    report() {},
    // Down, it stays down until a restart; up, a 503 is a statement that could not wait (busy).
    retryAfterSeconds: () => (reason === undefined ? 1 : 60),
    onChange(listener) {
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
      };
    },
    close() {
      stop();
      listeners.clear();
    },
  };
}
