import { performance } from 'node:perf_hooks';
import { type RawBuilder, sql } from 'kysely';
import { silentLogger, type WorkerLogger } from '../logger.js';
import type { Database } from './database.js';
import { oneAtATime } from './one-at-a-time.js';

// autovacuum's own defaults (PostgreSQL's `autovacuum_*` settings): a table is vacuumed once its
// dead rows, or its rows inserted since the last vacuum, pass threshold + scale x its row count,
// and analyzed once the rows changed since the last analyze do. Proportional thresholds keep the
// cost of maintenance per row written constant however large the tables grow. By counter:
// `autovacuum_vacuum_*`, `autovacuum_vacuum_insert_*` and `autovacuum_analyze_*`.
const AUTOVACUUM = {
  dead: { threshold: 50, scale: 0.2 },
  inserted: { threshold: 1000, scale: 0.2 },
  modified: { threshold: 50, scale: 0.1 },
} as const;

/** The count of rows past which a table of `rows` rows is due (`threshold + scale x rows`). */
const limitOf = ({ threshold, scale }: { threshold: number; scale: number }, rows: number): number =>
  threshold + scale * rows;

/**
 * The statistics target of the passes' ANALYZE (PostgreSQL's default is 100): its sample is 300
 * times this many rows. At 100, an ANALYZE of the deliveries or events of 80,000 to 200,000
 * deliveries held the database for 250 to 525 ms; at 10, for 60 ms at most. The sender's queries
 * are key lookups and index walks, which the planner picks as well from the smaller sample.
 */
const STATISTICS_TARGET = 10;

/**
 * A periodic pass rests this many times a statement's own time after it, before its next
 * statement: maintenance then takes at most a tenth of the database's time (PostgreSQL's autovacuum
 * paces itself the same way, with its cost delay). PGlite is one connection on the sender's one
 * thread: a pass's statements run back to back held it for 60 to 130 ms every 10 s at 400
 * sessions/s, and the sessions and deliveries queued behind them drained over the next second when
 * the machine had little room to spare. `run()` does not rest: it is asked for now.
 */
const REST_PER_MS = 9;

/** Idempotency keys older than this are deleted: twice the 24 hours their responses are replayed. */
const IDEMPOTENCY_PRUNE_MS = 48 * 3600_000;
/** How often the expired idempotency keys are looked for (a scan of that table). */
const PRUNE_EVERY_MS = 3600_000;

/** Options of {@link createMaintenance}. */
export interface MaintenanceOptions {
  database: Database;
  /**
   * How often the tables' counters are read to see whether any needs a vacuum or an analyze, in ms
   * (default 10 s); 0 never runs a pass by itself (`run()` still does).
   */
  intervalMs?: number;
  logger?: WorkerLogger;
  /** The clock of the idempotency keys' pruning (injectable for tests). */
  now?: () => Date;
}

/** One statement of a maintenance pass: a VACUUM or an ANALYZE of one table. */
export interface TableMaintenance {
  table: string;
  action: 'vacuum' | 'analyze';
  /** Dead rows the table's counters showed before the pass. */
  deadRows: number;
  /** How long the statement held the database (PGlite's one connection), in ms. */
  ms: number;
}

/** What a maintenance pass did. */
export interface MaintenanceReport {
  /** The statements run, in order. */
  tables: TableMaintenance[];
  /** Expired idempotency keys deleted. */
  pruned: number;
}

/** The embedded database's housekeeping (see {@link createMaintenance}). */
export interface Maintenance {
  /** Runs a pass every `intervalMs` until `stop()`. */
  start(): void;
  /**
   * Runs a pass now (after the one running, if any), its statements back to back, and resolves with
   * what it did.
   */
  run(): Promise<MaintenanceReport>;
  /** Stops the passes; resolves once a statement that is running has finished. */
  stop(): Promise<void>;
}

interface TableCounters {
  schema: string;
  table: string;
  dead: number;
  modified: number;
  inserted: number;
  rows: number;
}

/**
 * Vacuums and analyzes the embedded database, which nothing else maintains: PGlite is PostgreSQL
 * in single-user mode, with no background workers, so autovacuum never runs. Every `intervalMs`, a
 * pass reads each table's counters (`pg_stat_user_tables`) and runs `VACUUM` and `ANALYZE` on the
 * tables past autovacuum's default thresholds, each table and each of the two a statement of its
 * own, so that the deliveries and requests queued meanwhile run between them (PGlite is one
 * connection: a statement holds it). Expired idempotency keys (over 48 hours old) are deleted once an hour.
 * On PostgreSQL the server's autovacuum does all this, and the passes do nothing.
 *
 * @example
 * ```ts
 * const maintenance = createMaintenance({ database, logger: app.log });
 * maintenance.start();
 * process.on('SIGTERM', async () => { await maintenance.stop(); await database.close(); });
 * ```
 */
export function createMaintenance(options: MaintenanceOptions): Maintenance {
  const { database } = options;
  const intervalMs = options.intervalMs ?? 10_000;
  if (!Number.isInteger(intervalMs) || intervalMs < 0) {
    throw new TypeError(`Invalid intervalMs: ${intervalMs} (an integer, 0 or more).`);
  }
  const log = options.logger ?? silentLogger;
  const now = options.now ?? (() => new Date());
  const active = database.kind === 'pglite';
  let timer: NodeJS.Timeout | undefined;
  let stopping = false;
  let lastPrune = Number.NEGATIVE_INFINITY;
  /** Ends the rest between two statements of a periodic pass at once (`stop()`). */
  let endRest: (() => void) | undefined;

  function rest(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      timer.unref();
      endRest = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  async function counters(): Promise<TableCounters[]> {
    // The backend's own counters reach the view when it flushes them, at most once a second, as it
    // goes idle; a wait in between flushes nothing. This makes the next idle moment flush them.
    await sql`select pg_stat_force_next_flush()`.execute(database.db);
    const { rows } = await sql<TableCounters>`
      select s.schemaname as schema, s.relname as table, s.n_dead_tup::float8 as dead,
             s.n_mod_since_analyze::float8 as modified, s.n_ins_since_vacuum::float8 as inserted,
             greatest(c.reltuples, 0)::float8 as rows
      from pg_stat_user_tables s join pg_class c on c.oid = s.relid`.execute(database.db);
    return rows;
  }

  async function prune(): Promise<number> {
    const at = now().getTime();
    if (at - lastPrune < PRUNE_EVERY_MS) return 0;
    lastPrune = at;
    const result = await database.db
      .deleteFrom('idempotency_keys')
      .where('created_at', '<', new Date(at - IDEMPOTENCY_PRUNE_MS))
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  /**
   * VACUUM, outside a transaction (it refuses one). Resolves with how long it held the database, in
   * ms: timed once it has the connection, since the wait for its turn is not the database's time.
   */
  function vacuum(name: RawBuilder<unknown>): Promise<number> {
    return database.db.connection().execute(async (connection) => {
      const t0 = performance.now();
      await sql`vacuum ${name}`.execute(connection);
      return performance.now() - t0;
    });
  }

  /** ANALYZE at {@link STATISTICS_TARGET}, set for its transaction alone; resolves with its time, in ms. */
  function analyze(name: RawBuilder<unknown>): Promise<number> {
    return database.db.transaction().execute(async (tx) => {
      const t0 = performance.now();
      await sql`select set_config('default_statistics_target', ${String(STATISTICS_TARGET)}, true)`.execute(
        tx,
      );
      await sql`analyze ${name}`.execute(tx);
      return performance.now() - t0;
    });
  }

  /** A pass; a periodic one (`paced`) rests after each statement (see {@link REST_PER_MS}). */
  async function pass(paced: boolean): Promise<MaintenanceReport> {
    const report: MaintenanceReport = { tables: [], pruned: 0 };
    if (!active || stopping) return report;
    report.pruned = await prune();
    // The deleted keys are dead rows: counted in the counters read next.
    const due = (await counters())
      .map((t) => ({
        ...t,
        vacuum:
          t.dead > limitOf(AUTOVACUUM.dead, t.rows) || t.inserted > limitOf(AUTOVACUUM.inserted, t.rows),
        analyze: t.modified > limitOf(AUTOVACUUM.modified, t.rows),
        // The most bloated first: a stop between two statements leaves the others for later.
        urgency: t.dead / limitOf(AUTOVACUUM.dead, t.rows),
      }))
      .filter((t) => t.vacuum || t.analyze)
      .sort((a, b) => b.urgency - a.urgency);
    for (const t of due) {
      const name = sql.id(t.schema, t.table);
      // Each its own statement, and the work queued meanwhile runs between them.
      const actions = [...(t.vacuum ? ['vacuum' as const] : []), ...(t.analyze ? ['analyze' as const] : [])];
      for (const action of actions) {
        if (stopping) return report;
        const ms = await (action === 'vacuum' ? vacuum(name) : analyze(name));
        const done: TableMaintenance = { table: t.table, action, deadRows: t.dead, ms };
        report.tables.push(done);
        log.info({ ...done, ms: Math.round(ms) }, 'database maintenance');
        if (paced && !stopping) await rest(REST_PER_MS * ms);
      }
    }
    return report;
  }

  const passes = oneAtATime(pass);
  const run = () => passes.run(false);

  return {
    start() {
      if (!active || intervalMs === 0 || timer !== undefined || stopping) return;
      timer = setInterval(() => {
        // A pass that outlasts the interval is not queued behind: the next tick looks again.
        if (passes.busy() !== undefined) return;
        passes.run(true).catch((error: unknown) => log.error({ err: error }, 'database maintenance failed'));
      }, intervalMs);
      timer.unref();
    },
    run,
    async stop() {
      stopping = true;
      clearInterval(timer);
      endRest?.();
      await passes.busy();
    },
  };
}
