import { mkdir } from 'node:fs/promises';
import { PGlite } from '@electric-sql/pglite';
import {
  Kysely,
  Migrator,
  type PostgresCursor,
  PostgresDialect,
  type PostgresPool,
  type PostgresPoolClient,
  type PostgresQueryResult,
  sql,
  type Transaction,
} from 'kysely';
import pg from 'pg';
import { lockDataDir } from './lock.js';
import { migrationProvider } from './migrations.js';
import { pgliteDialect } from './pglite-pool.js';
import type { Schema } from './schema.js';

/** Where the sender keeps its data. */
export type DatabaseOptions =
  /** Embedded PGlite in a data directory (the default: nothing to install). */
  | { dataDir: string }
  /** A PostgreSQL server; `schema` (created if missing) keeps this sender's tables apart. */
  | { url: string; schema?: string };

/** An open, migrated database. */
export interface Database {
  db: Kysely<Schema>;
  /**
   * Runs the delivery worker's statements (claims, attempt records, lease renewals and releases)
   * under the worker's planner settings ({@link WORKER_PLANNER}). On PostgreSQL on a small pool of
   * their own, whose commits also do not wait for the WAL to reach the disk (`synchronous_commit =
   * off`): a claim or an attempt record lost in a server crash only means the delivery is sent
   * again, which at-least-once delivery allows, and the worker's throughput no longer waits on the
   * disk. The API's writes stay on `db`, fully durable. On PGlite, in a transaction of `db` that
   * sets the planner settings for itself alone.
   *
   * @example
   * ```ts
   * const { claims } = await database.delivery((db) => claimDeliveries(db, { now, leaseMs, limit }));
   * ```
   */
  delivery<T>(fn: (db: Kysely<Schema> | Transaction<Schema>) => Promise<T>): Promise<T>;
  kind: 'pglite' | 'postgres';
  /**
   * Calls `onNotify` for each NOTIFY on `channel` (delivered when the notifying transaction
   * commits, from any instance on the same database). Resolves once listening; the returned
   * function stops. On PostgreSQL a dropped listening connection is reopened after a second.
   */
  listen(channel: string, onNotify: () => void): Promise<() => Promise<void>>;
  /** Closes connections and releases the data directory's lock. */
  close(): Promise<void>;
}

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * The planner settings of the delivery worker's statements: no sequential, bitmap or sorted plans,
 * and joins by nested loop only (a hash or merge join reads all of one side: the whole table,
 * through an index as readily as by a sequential scan). Each of those statements is a lookup by
 * primary key or a walk of the due index in its order, and on PostgreSQL it is planned once per
 * connection (`PREPARE`). Planned while the deliveries table was small, or after it grew faster
 * than its statistics (a burst of events between two ANALYZEs; PGlite, which has no autovacuum,
 * never analyzes), such a statement read the whole table instead: every batch of attempt records
 * joined all the deliveries, every claim sorted all the due ones. With 20,000 deliveries queued on
 * a fresh table, that more than doubled the server's CPU time per delivery. A disabled plan type
 * stays available where nothing else can run a statement; it only loses every comparison.
 */
export const WORKER_PLANNER = {
  enable_seqscan: 'off',
  enable_bitmapscan: 'off',
  enable_sort: 'off',
  enable_hashjoin: 'off',
  enable_mergejoin: 'off',
  // A disabled plan that is the only way (a sort no index can replace) costs 1e10 in the
  // planner's units: far past the point where PostgreSQL compiles a statement with LLVM, at over
  // 100 ms an execution, for a statement that runs in a fraction of a millisecond.
  jit: 'off',
} as const;

/** {@link WORKER_PLANNER} for the rest of the current transaction only (PGlite's one session). */
const SET_WORKER_PLANNER_LOCALLY = sql`select ${sql.join(
  Object.entries(WORKER_PLANNER).map(([name, value]) => sql`set_config(${name}, ${value}, true)`),
)}`;

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

/** A pool for Kysely whose connections run statements marked with `PREPARE` as named statements. */
function preparing(pool: pg.Pool): PostgresPool {
  const clients = new WeakMap<pg.PoolClient, PostgresPoolClient>();
  return {
    async connect() {
      const client = await pool.connect();
      let wrapped = clients.get(client);
      if (wrapped === undefined) {
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
            if (name !== undefined) return client.query({ name, text, values: values as unknown[] });
          }
          return client.query(text, values as unknown[]);
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
 * Opens the sender's database and applies pending migrations: PGlite in `dataDir` (locked by
 * this process; a lock left by a killed process is taken over), or PostgreSQL at `url`.
 *
 * @example
 * ```ts
 * const { db, close } = await openDatabase(process.env.DATABASE_URL
 *   ? { url: process.env.DATABASE_URL }
 *   : { dataDir: process.env.PAYHOOK_DATA_DIR ?? './.payhook' });
 * ```
 */
export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  let db: Kysely<Schema>;
  let deliveryDb: Kysely<Schema> | undefined;
  let kind: Database['kind'];
  let release = async () => {};
  let listen: Database['listen'];
  if ('dataDir' in options) {
    await mkdir(options.dataDir, { recursive: true });
    release = await lockDataDir(options.dataDir);
    try {
      const pglite = new PGlite(options.dataDir);
      await pglite.waitReady;
      db = new Kysely<Schema>({ dialect: pgliteDialect(pglite) });
      listen = async (channel, onNotify) => {
        const unsubscribe = await pglite.listen(channel, () => onNotify());
        return async () => {
          if (!pglite.closed) await unsubscribe();
        };
      };
    } catch (error) {
      await release();
      throw error;
    }
    kind = 'pglite';
  } else {
    const schema = options.schema;
    if (schema !== undefined && !IDENTIFIER.test(schema)) {
      throw new TypeError(
        `Invalid schema name: ${JSON.stringify(schema)} (lower-case letters, digits and _).`,
      );
    }
    const searchPath = schema !== undefined ? `-c search_path=${schema}` : '';
    const pool = new pg.Pool({
      connectionString: options.url,
      ...(searchPath ? { options: searchPath } : {}),
    });
    // The worker runs one claim and one group-committed write at a time, and renews or releases
    // now and then: a few connections are all it uses.
    const deliveryPool = new pg.Pool({
      connectionString: options.url,
      max: 4,
      options: [
        searchPath,
        '-c synchronous_commit=off',
        ...Object.entries(WORKER_PLANNER).map(([name, value]) => `-c ${name}=${value}`),
      ]
        .join(' ')
        .trim(),
    });
    // An idle connection the server dropped is replaced on the next query; without a listener
    // its error event would end the process.
    pool.on('error', () => {});
    deliveryPool.on('error', () => {});
    db = new Kysely<Schema>({ dialect: new PostgresDialect({ pool: preparing(pool) }) });
    deliveryDb = new Kysely<Schema>({ dialect: new PostgresDialect({ pool: preparing(deliveryPool) }) });
    kind = 'postgres';
    listen = (channel, onNotify) => listenOnPostgres(options.url, channel, onNotify);
  }
  try {
    await withMigrationLock(options, async () => {
      // The migration tables live in this sender's schema: left unqualified, Kysely would take
      // another schema's tables (on the search path or not) for this one's.
      const { error, results } = await new Migrator({
        db,
        provider: migrationProvider,
        ...('url' in options && options.schema !== undefined ? { migrationTableSchema: options.schema } : {}),
      }).migrateToLatest();
      if (error) {
        const failed = results?.find((r) => r.status === 'Error')?.migrationName;
        throw new Error(`Migration ${failed ?? '(unknown)'} failed: ${(error as Error).message}`, {
          cause: error,
        });
      }
    });
  } catch (error) {
    await deliveryDb?.destroy();
    await db.destroy();
    await release();
    throw error;
  }
  const workerDb = deliveryDb;
  return {
    db,
    delivery: workerDb
      ? (fn) => fn(workerDb)
      : (fn) =>
          db.transaction().execute(async (tx) => {
            await SET_WORKER_PLANNER_LOCALLY.execute(tx);
            return fn(tx);
          }),
    kind,
    listen,
    async close() {
      await deliveryDb?.destroy();
      await db.destroy();
      await release();
    },
  };
}

/**
 * Runs `fn` holding a PostgreSQL advisory lock for this schema, on a session of its own, after
 * creating the schema if needed: sender instances starting together on a fresh database would
 * otherwise race to create it and the migration tables. PGlite has one process by construction
 * (its directory lock). The schema name was checked to be a plain identifier.
 */
async function withMigrationLock(options: DatabaseOptions, fn: () => Promise<void>): Promise<void> {
  if ('dataDir' in options) return fn();
  const client = new pg.Client({ connectionString: options.url });
  await client.connect();
  const key = `payhook-migrations:${options.schema ?? 'public'}`;
  try {
    await client.query('select pg_advisory_lock(hashtext($1))', [key]);
    // The schema is made under the lock too: two sessions creating it at once collide.
    if (options.schema !== undefined) await client.query(`create schema if not exists ${options.schema}`);
    await fn();
  } finally {
    await client.query('select pg_advisory_unlock(hashtext($1))', [key]).catch(() => {});
    await client.end();
  }
}

/** LISTEN on a connection of its own, reopened after a second whenever it drops. */
async function listenOnPostgres(
  url: string,
  channel: string,
  onNotify: () => void,
): Promise<() => Promise<void>> {
  let stopped = false;
  let client: pg.Client | undefined;
  let retry: NodeJS.Timeout | undefined;
  const open = async () => {
    const next = new pg.Client({ connectionString: url });
    next.on('notification', (message) => {
      if (message.channel === channel) onNotify();
    });
    next.on('error', () => {
      next.end().catch(() => {});
      if (client === next) reopen();
    });
    await next.connect();
    await next.query(`listen ${pg.escapeIdentifier(channel)}`);
    client = next;
    // Work may have been queued while no one listened.
    onNotify();
  };
  const reopen = () => {
    client = undefined;
    if (stopped) return;
    retry = setTimeout(() => open().catch(reopen), 1000);
    retry.unref();
  };
  await open();
  return async () => {
    stopped = true;
    clearTimeout(retry);
    await client?.end().catch(() => {});
  };
}

/** The migrations applied to a database, oldest first (for diagnostics and tests). */
export async function appliedMigrations(db: Kysely<Schema>): Promise<string[]> {
  const rows = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(db);
  return rows.rows.map((r) => r.name);
}
