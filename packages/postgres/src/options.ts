// The options of createPostgresStore: what each means, their checks and their defaults.
import { checkStoreTimes } from '@payhook/core';
import type { Pool, PoolConfig } from 'pg';

/** Options of `createPostgresStore`. */
export interface PostgresStoreOptions {
  /**
   * A `pg` pool (never ended by the store), or a connection string (the store's own pool, ended by
   * `close()`). Handlers get their transaction from this pool: give it a `max` above the
   * receiver's `concurrency`, since each running attempt holds a connection until it commits. The
   * store keeps two of the pool's connections out of the handlers' reach, so that claims (the 200)
   * never wait for a handler. The store listens to the pool's `error` events (a connection that broke
   * while idle), which would otherwise end the process: the pool drops it and connects anew.
   */
  pool: Pool | string;
  /** Schema of the inbox table (default `payhook`), created if missing. */
  schema?: string;
  /** Name of the inbox table (default `inbox`). */
  table?: string;
  /**
   * Creates the schema and table on first use, if missing (default true), under an advisory lock so
   * that instances starting together do not race. Pass false when your own migrations create them
   * from `inboxMigrationSql()`.
   */
  migrate?: boolean;
  /** How long finished and failed events are kept, in ms (default 7 days): duplicates and replays within it are refused. */
  retentionMs?: number;
  /**
   * Lease on an event being processed, for receivers that set none (default 30 s): an event whose
   * owner died is recovered by another instance this long after its last renewal.
   */
  leaseMs?: number;
  /**
   * Time allowed to each statement of the store's own (claim, renew, done mark, commit...), in ms,
   * a connection's wait included (default 2000); past it the store is unavailable and the receiver
   * answers 503. The handlers' own statements run under the receiver's `handlerTimeoutMs`.
   */
  commandTimeoutMs?: number;
  /** Extra options for the pool the store creates from a connection string. */
  poolOptions?: PoolConfig;
}

/** The options `createPostgresStore` runs with, checked, defaults filled in. */
export interface ResolvedOptions {
  schema: string;
  table: string;
  retentionMs: number;
  timeoutMs: number;
  migrate: boolean;
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** Checks an SQL identifier the store quotes and writes into its statements. */
export function checkIdentifier(name: string, value: unknown): string {
  if (typeof value !== 'string' || !IDENTIFIER.test(value)) {
    throw new TypeError(
      `Invalid ${name}: ${JSON.stringify(value)} (letters, digits and underscores, not starting with a digit, at most 63).`,
    );
  }
  return value;
}

/** Checks the options (a TypeError naming the first wrong one) and fills in the defaults. */
export function resolveOptions(options: PostgresStoreOptions): ResolvedOptions {
  const schema = checkIdentifier('schema', options.schema ?? 'payhook');
  const table = checkIdentifier('table', options.table ?? 'inbox');
  // The lease is an integer here: the statements add it to bigint milliseconds.
  const { retentionMs, timeoutMs } = checkStoreTimes(options, {
    commandTimeoutMs: 2000,
    leaseKind: 'integer',
  });
  const migrate = options.migrate ?? true;
  if (typeof migrate !== 'boolean') {
    throw new TypeError(`Invalid migrate: ${JSON.stringify(migrate)} (expected true or false).`);
  }
  return { schema, table, retentionMs, timeoutMs, migrate };
}
