import { mkdir } from 'node:fs/promises';
import { Kysely, Migrator, PostgresDialect, sql, type Transaction } from 'kysely';
import pg from 'pg';
import { ALWAYS_UP, createDatabaseHealth, type DatabaseHealth, oneWayHealth } from './health.js';
import { lockDataDir } from './lock.js';
import { migrationProvider } from './migrations.js';
import { buildOnlineIndexes } from './online-indexes.js';
import { pgliteDialect } from './pglite-pool.js';
import { PGliteThread } from './pglite-thread.js';
import {
  createPool,
  DEFAULT_TIMEOUTS,
  kyselyPool,
  listenOnPostgres,
  type PostgresTimeouts,
  probe,
} from './postgres.js';
import type { Schema } from './schema.js';
import { withSchemaIntrospection } from './schema-introspection.js';
import { SecretBoxPlugin, sealStoredSecrets } from './sealed-secrets.js';
import { createSecretBox, readSecretKeys, SecretKeyError, type SecretKeys } from './secret-box.js';
import { dataDirSecretKeys, type SecretKeyFile } from './secret-key-file.js';
import { createWakeSignal, WAKE_CHANNEL, type WakeSignal } from './wake.js';

export { type PostgresTimeouts, PREPARE } from './postgres.js';

/** Where the sender keeps its data, and the key its signing secrets are sealed with. */
export type DatabaseOptions =
  /**
   * Embedded PGlite in a data directory (the default: nothing to install); `acquireTimeoutMs`
   * bounds how long an API statement waits for PGlite's thread (default
   * {@link DEFAULT_TIMEOUTS}'s): past it, the statement fails with code `PGLITE_BUSY` before it is
   * sent, which the API answers 503.
   */
  (
    | ({ dataDir: string } & Partial<Pick<PostgresTimeouts, 'acquireTimeoutMs'>>)
    /**
     * A PostgreSQL server; `schema` (created if missing) keeps this sender's tables apart; the
     * timeouts bound every wait on it (default {@link DEFAULT_TIMEOUTS}); `poolSize` is how many
     * connections the API's statements share (default 10; the delivery worker has 4 of its own).
     */
    | ({ url: string; schema?: string; poolSize?: number } & Partial<PostgresTimeouts>)
  ) & {
    /**
     * The keys that seal the signing secrets; when the option is absent,
     * `readSecretKeys(process.env)` (PAYHOOK_SECRET_KEY and PAYHOOK_SECRET_KEY_PREVIOUS). Without
     * keys, PGlite keeps one in a file of its data directory (mode 0600), and PostgreSQL refuses to
     * open (`secret_key_missing`).
     */
    secretKeys?: SecretKeys | undefined;
  };

/**
 * The connections the API's statements share in each process, by default: `pg`'s own default.
 * Each process opens up to this many, plus the worker's 4, against the server's
 * `max_connections`; a provider at its peak may want more (`PAYHOOK_DB_POOL_SIZE`; bench/README.md,
 * "latency").
 */
const DEFAULT_POOL_SIZE = 10;

/** The delivery worker's own connections on PostgreSQL (claims, records, renewals, releases). */
export const DELIVERY_POOL_SIZE = 4;

/** An open, migrated database. */
export interface Database {
  db: Kysely<Schema>;
  /**
   * Runs the delivery worker's statements (claims, attempt records, lease renewals and releases)
   * under the worker's planner settings ({@link WORKER_PLANNER}). On PostgreSQL on a small pool of
   * their own, whose commits also do not wait for the WAL to reach the disk (`synchronous_commit =
   * off`): a claim or an attempt record lost in a server crash only means the delivery is sent
   * again, which at-least-once delivery allows, and the worker's throughput no longer waits on the
   * disk. The API's writes stay on `db`, fully durable. On PGlite, on the session of `db`, each
   * statement with the planner settings set before it and reset after it, in the same message.
   *
   * @example
   * ```ts
   * const { claims } = await database.delivery((db) => claimDeliveries(db, { now, leaseMs, limit }));
   * ```
   */
  delivery<T>(fn: (db: Kysely<Schema> | Transaction<Schema>) => Promise<T>): Promise<T>;
  kind: 'pglite' | 'postgres';
  /**
   * The file of the data directory the sealing key was read from (made now when `created`), or
   * undefined when it came from the environment or the options.
   */
  secretKeyFile: SecretKeyFile | undefined;
  /**
   * Whether the database answers (PostgreSQL: checked when a connection fails, then again with a
   * backoff until it is back; PGlite, in this process, is always up).
   */
  health: DatabaseHealth;
  /**
   * Calls `onNotify` for each NOTIFY on `channel` (delivered when the notifying transaction
   * commits, from any instance on the same database). Resolves once listening; the returned
   * function stops. On PostgreSQL a dropped or silent listening connection is opened again with a
   * backoff, and each reopening calls `onNotify` once (wake-ups may have been missed meanwhile).
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
  let health = ALWAYS_UP;
  /** Wakes the delivery workers once deliveries are committed (`./wake.ts`). */
  let wake: WakeSignal;
  /** The migrations run without the statement timeout: one may rewrite a large table. */
  let migrationDb: Kysely<Schema> | undefined;
  /** Carries the sealing key on every Kysely instance of this database (`./sealed-secrets.ts`). */
  const secrets = new SecretBoxPlugin();
  let secretKeys = 'secretKeys' in options ? options.secretKeys : readSecretKeys(process.env);
  let secretKeyFile: SecretKeyFile | undefined;
  if (!secretKeys && !('dataDir' in options)) {
    throw new SecretKeyError(
      'secret_key_missing',
      'PAYHOOK_SECRET_KEY is not set: on PostgreSQL the signing secrets are sealed with a key kept outside the database. Make one with `payhook keys secret-key` and set it on every instance.',
    );
  }
  if ('dataDir' in options) {
    await mkdir(options.dataDir, { recursive: true });
    release = await lockDataDir(options.dataDir);
    let pglite: PGliteThread | undefined;
    try {
      // On a thread of its own: the WASM database and the API's and worker's JavaScript take a
      // core each (docs/decisions.md, "PGlite runs on a thread of its own").
      pglite = await PGliteThread.open(options.dataDir);
      const opened = pglite;
      // A PGlite that failed does not come back: the API answers 503 until the sender restarts.
      health = oneWayHealth((listener) => opened.onFailure(listener));
      // A new WAL segment is made without writing its 16 MB of zeros first: that write held
      // PGlite's thread for 6 to 47 ms each time, every few seconds at a few hundred sessions a
      // second until recycled segments take over (docs/decisions.md, "PGlite keeps up").
      await pglite.exec('set wal_init_zero = off');
      if (!secretKeys) ({ keys: secretKeys, file: secretKeyFile } = await dataDirSecretKeys(options.dataDir));
      // One process holds the directory: the wake-ups of its commits are all there is.
      wake = createWakeSignal();
      // The API's statements wait at most the acquire timeout, as for a pooled connection.
      const session = pgliteDialect(pglite, wake, {
        waitLimitMs: options.acquireTimeoutMs ?? DEFAULT_TIMEOUTS.acquireTimeoutMs,
      });
      db = new Kysely<Schema>({ dialect: session, plugins: [secrets] });
      // The worker's statements, each with the planner settings around it in its own message.
      deliveryDb = new Kysely<Schema>({ dialect: session.withSettings(WORKER_PLANNER), plugins: [secrets] });
      const thread = pglite;
      const sessionDb = db;
      listen = async (channel, onNotify) => {
        const local = channel === WAKE_CHANNEL ? wake.subscribe(onNotify) : () => {};
        const notified = thread.onNotification(channel, () => onNotify());
        const name = sql.id(channel);
        try {
          // In the session's turn: sent among a transaction's statements, a LISTEN would be its.
          await sql`listen ${name}`.execute(sessionDb);
        } catch (error) {
          local();
          notified();
          throw error;
        }
        return async () => {
          local();
          notified();
          if (!thread.closed) await sql`unlisten ${name}`.execute(sessionDb);
        };
      };
    } catch (error) {
      await pglite?.close();
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
    const poolSize = options.poolSize ?? DEFAULT_POOL_SIZE;
    if (!Number.isInteger(poolSize) || poolSize < 1 || poolSize > 1000) {
      throw new TypeError(`Invalid poolSize: ${JSON.stringify(poolSize)} (a whole number from 1 to 1000).`);
    }
    const searchPath = schema !== undefined ? `-c search_path=${schema}` : '';
    const timeouts: PostgresTimeouts = {
      acquireTimeoutMs: options.acquireTimeoutMs ?? DEFAULT_TIMEOUTS.acquireTimeoutMs,
      statementTimeoutMs: options.statementTimeoutMs ?? DEFAULT_TIMEOUTS.statementTimeoutMs,
    };
    const connection = { connectionString: options.url, ...(searchPath ? { options: searchPath } : {}) };
    health = createDatabaseHealth({ probe: () => probe(connection, timeouts) });
    const pool = createPool({ ...connection, max: poolSize }, timeouts);
    // The worker runs one claim and one group-committed write at a time, and renews or releases
    // now and then: a few connections are all it uses.
    const deliveryPool = createPool(
      {
        connectionString: options.url,
        max: DELIVERY_POOL_SIZE,
        options: [
          searchPath,
          '-c synchronous_commit=off',
          ...Object.entries(WORKER_PLANNER).map(([name, value]) => `-c ${name}=${value}`),
        ]
          .join(' ')
          .trim(),
      },
      timeouts,
    );
    // The other instances are woken by a NOTIFY on the worker's pool, whose commits do not wait
    // for the disk, outside any request's transaction.
    const signal = createWakeSignal(async (id) => {
      if (deliveryDb) await sql`select pg_notify(${WAKE_CHANNEL}, ${id})`.execute(deliveryDb);
    });
    wake = signal;
    db = new Kysely<Schema>({
      dialect: new PostgresDialect({ pool: kyselyPool(pool, timeouts, health, signal) }),
      plugins: [secrets],
    });
    deliveryDb = new Kysely<Schema>({
      dialect: new PostgresDialect({ pool: kyselyPool(deliveryPool, timeouts, health, signal) }),
      plugins: [secrets],
    });
    migrationDb = new Kysely<Schema>({
      dialect: withSchemaIntrospection(
        new PostgresDialect({
          pool: createPool({ ...connection, max: 1 }, { ...timeouts, statementTimeoutMs: 0 }),
        }),
        schema,
      ),
    });
    kind = 'postgres';
    listen = async (channel, onNotify) => {
      if (channel !== WAKE_CHANNEL)
        return listenOnPostgres({ connectionString: options.url }, timeouts, channel, () => onNotify());
      // This process's commits wake it directly; its own NOTIFYs, for the others, are let pass.
      const local = signal.subscribe(onNotify);
      const stop = await listenOnPostgres({ connectionString: options.url }, timeouts, channel, (from) => {
        if (from !== signal.id) onNotify();
      });
      return async () => {
        local();
        await stop();
      };
    };
  }
  try {
    await withMigrationLock(options, async () => {
      // The migration tables live in this sender's schema: left unqualified, Kysely would take
      // another schema's tables (on the search path or not) for this one's.
      const { error, results } = await new Migrator({
        db: migrationDb ?? db,
        provider: migrationProvider,
        ...('url' in options && options.schema !== undefined ? { migrationTableSchema: options.schema } : {}),
      }).migrateToLatest();
      if (error) {
        const failed = results?.find((r) => r.status === 'Error')?.migrationName;
        throw new Error(`Migration ${failed ?? '(unknown)'} failed: ${(error as Error).message}`, {
          cause: error,
        });
      }
      await buildOnlineIndexes(
        (migrationDb ?? db) as Kysely<unknown>,
        kind,
        'url' in options ? options.schema : undefined,
      );
      // The keys are checked against the stored values (one each), then what is stored as it is,
      // or under a previous key, is sealed under the current one.
      secrets.box = createSecretBox(secretKeys as SecretKeys);
      await sealStoredSecrets(migrationDb ?? db, secrets.box);
    });
  } catch (error) {
    health.close();
    await deliveryDb?.destroy();
    await db.destroy();
    await release();
    throw error;
  } finally {
    await migrationDb?.destroy();
  }
  const workerDb = deliveryDb ?? db;
  return {
    db,
    delivery: (fn) => fn(workerDb),
    kind,
    secretKeyFile,
    health,
    listen,
    async close() {
      health.close();
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
  // A connection lost here fails the statement under way (and the start): not the process.
  client.on('error', () => {});
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

/** The migrations applied to a database, oldest first (for diagnostics and tests). */
export async function appliedMigrations(db: Kysely<Schema>): Promise<string[]> {
  const rows = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(db);
  return rows.rows.map((r) => r.name);
}
