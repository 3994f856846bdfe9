import { performance } from 'node:perf_hooks';
import type { Database } from '../db/database.js';
import { oneAtATime } from '../db/one-at-a-time.js';
import { silentLogger, type WorkerLogger } from '../logger.js';
import { type HistoryCursor, removeEventBatch, removeExpired } from './sql/remove-history.js';

/** The tables a retention pass removes rows from, as `payhook_retention_removed_total` labels them. */
export const RETENTION_TABLES = [
  'events',
  'deliveries',
  'delivery_attempts',
  'endpoint_attempt_hours',
  'idempotency_keys',
  'dashboard_sessions',
] as const;

/** One of {@link RETENTION_TABLES}. */
export type RetentionTable = (typeof RETENTION_TABLES)[number];

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
/**
 * Idempotency keys are replayed for 24 hours and deleted after twice that (as the PGlite
 * maintenance's own pruning does), whatever the history's retention.
 */
const IDEMPOTENCY_KEPT_MS = 48 * HOUR_MS;

/**
 * The retention horizon at `now`: events created before it, and their deliveries and attempts,
 * may have been removed (null when the history is kept for ever). Takes the configuration or its
 * number of days.
 *
 * @example
 * ```ts
 * const horizon = retentionHorizon(config, new Date());
 * if (horizon && since < horizon) throw new ApiError('validation_failed', `before ${horizon.toISOString()}`);
 * ```
 */
export function retentionHorizon(
  retention: number | null | { retentionDays: number | null },
  now: Date,
): Date | null {
  const days = typeof retention === 'object' && retention !== null ? retention.retentionDays : retention;
  return days === null ? null : new Date(now.getTime() - days * DAY_MS);
}

/** Options of {@link createRetention}. */
export interface RetentionOptions {
  database: Database;
  /** Days the history is kept; null keeps it for ever (expired idempotency keys and sessions still go). */
  days: number | null;
  /** Time between passes, in ms (default one hour); 0 never runs a pass by itself (`run()` still does). */
  intervalMs?: number;
  /** Time from `start()` to the first pass, in ms (default one minute, or `intervalMs` if shorter). */
  firstDelayMs?: number;
  /**
   * Events removed per transaction at most, with their deliveries and attempts: by default 1,000
   * on PostgreSQL, 250 on PGlite, whose one connection each batch holds (what queues behind a
   * smaller batch waits less).
   */
  batchSize?: number;
  /** The clock of the horizon (injectable for tests). */
  now?: () => Date;
  logger?: WorkerLogger;
  /** Called with the report of every pass that ran (for the metrics). */
  onPass?: (report: RetentionReport) => void;
}

/** What a retention pass did. */
export interface RetentionReport {
  /** Events created before it (with their history) were the pass's to remove; null: kept for ever. */
  horizon: Date | null;
  /** Rows removed, by table. */
  removed: Record<RetentionTable, number>;
  /** Transactions that removed rows. */
  batches: number;
  /**
   * False when the pass ended before it had looked at everything: stopped by `stop()`, another
   * instance on the same database was running its own, or a batch failed (logged).
   */
  complete: boolean;
  /** When it ended, on the retention's clock. */
  finishedAt: Date;
  /** How long it took, pauses between batches included, in ms. */
  ms: number;
}

/** The sender's retention of its history (see {@link createRetention}). */
export interface Retention {
  /** Runs a pass after `firstDelayMs`, then every `intervalMs`, until `stop()`. */
  start(): void;
  /** Runs a pass now (after the one running, if any) and resolves with what it did. */
  run(): Promise<RetentionReport>;
  /** Stops the passes; resolves once the batch running, if any, has committed. */
  stop(): Promise<void>;
}

const noneRemoved = (): Record<RetentionTable, number> => ({
  events: 0,
  deliveries: 0,
  delivery_attempts: 0,
  endpoint_attempt_hours: 0,
  idempotency_keys: 0,
  dashboard_sessions: 0,
});

/**
 * Removes the history past its retention: the events created before the horizon (`days` before
 * the clock's now) whose deliveries are all finished, delivered or failed, and finished before the
 * horizon too, with those deliveries and their attempts; the endpoints' hourly attempt counts
 * (`endpoint_attempt_hours`) of the hours before the horizon; and, whatever `days`, idempotency
 * keys over 48 hours old and expired dashboard sessions. Payments are kept. An event with a delivery
 * still pending (within its 48 hours, or held while its endpoint is disabled) stays, with all of
 * its history, however old.
 *
 * Batched deletes (docs/decisions.md, "Retention: 30 days, batched deletes"): each transaction
 * removes at most `batchSize` events, oldest first, and what hangs on them; rows another
 * transaction holds are skipped (`FOR UPDATE SKIP LOCKED`), so the pass never waits on a delivery
 * a worker has claimed or a redelivery is writing, and the rows it holds are finished deliveries
 * no worker touches. Between two batches the pass waits as long as the last one took, so it takes
 * at most half of the database's time (PGlite's one connection included, where the statements
 * queued meanwhile run first). One pass at a time in an instance; with several instances on one
 * PostgreSQL, a batch runs under a transaction-level advisory lock of the schema, and an instance
 * that finds it taken ends its pass. On PGlite, the VACUUM of what a pass left dead is the
 * maintenance's (`db/maintenance.ts`), which sees the deleted rows in the tables' counters.
 *
 * @example
 * ```ts
 * const retention = createRetention({ database, days: config.retentionDays, logger: app.log });
 * retention.start();
 * process.on('SIGTERM', async () => { await retention.stop(); await database.close(); });
 * ```
 */
export function createRetention(options: RetentionOptions): Retention {
  const { database, days } = options;
  const intervalMs = options.intervalMs ?? 3_600_000;
  const firstDelayMs = options.firstDelayMs ?? Math.min(60_000, intervalMs);
  const batchSize = options.batchSize ?? (database.kind === 'pglite' ? 250 : 1000);
  for (const [name, value, min] of [
    ['intervalMs', intervalMs, 0],
    ['firstDelayMs', firstDelayMs, 0],
    ['batchSize', batchSize, 1],
  ] as const) {
    if (!Number.isInteger(value) || value < min) {
      throw new TypeError(`Invalid ${name}: ${value} (an integer, ${min} or more).`);
    }
  }
  if (days !== null && (!Number.isInteger(days) || days < 1)) {
    throw new TypeError(`Invalid days: ${days} (an integer, 1 or more, or null).`);
  }
  const log = options.logger ?? silentLogger;
  const now = options.now ?? (() => new Date());
  let timer: NodeJS.Timeout | undefined;
  let stopping = false;
  /** Ends the pause between two batches at once (on stop). */
  let wake: (() => void) | undefined;

  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        wake = undefined;
        resolve();
      }
      wake = done;
    });

  async function pass(): Promise<RetentionReport> {
    const t0 = performance.now();
    const at = now();
    const horizon = retentionHorizon(days, at);
    const report: RetentionReport = {
      horizon,
      removed: noneRemoved(),
      batches: 0,
      complete: false,
      finishedAt: at,
      ms: 0,
    };
    const end = (complete: boolean) => {
      report.complete = complete;
      report.finishedAt = now();
      report.ms = performance.now() - t0;
      return report;
    };
    let failed = false;
    /**
     * Runs the batches of one table until one finds nothing; false when the pass must end (stop, or
     * another instance's turn). A batch that fails (a statement timeout, the database away) ends
     * that table's part, logged, and the pass goes on with the next.
     */
    const drain = async (
      table: RetentionTable,
      batch: () => Promise<{ more: boolean; busy?: boolean; removed: number }>,
    ) => {
      for (;;) {
        if (stopping) return false;
        const b0 = performance.now();
        let result: Awaited<ReturnType<typeof batch>>;
        try {
          result = await batch();
        } catch (error) {
          failed = true;
          log.error({ err: error, table }, 'retention batch failed');
          return true;
        }
        if (result.busy) return false;
        if (result.removed > 0) report.batches++;
        if (!result.more) return true;
        await pause(Math.max(1, Math.round(performance.now() - b0)));
      }
    };
    if (horizon) {
      let cursor: HistoryCursor | undefined;
      const done = await drain('events', async () => {
        const b = await database.db
          .transaction()
          .execute((tx) => removeEventBatch(tx, { horizon, cursor, limit: batchSize }));
        cursor = b.cursor ?? cursor;
        report.removed.events += b.events;
        report.removed.deliveries += b.deliveries;
        report.removed.delivery_attempts += b.attempts;
        return { more: b.seen === batchSize, busy: b.busy, removed: b.events };
      });
      if (!done) return end(false);
    }
    const expired = [
      // An endpoint's hourly counts, once the whole hour is past the horizon.
      ...(horizon ? [['endpoint_attempt_hours', new Date(horizon.getTime() - HOUR_MS)] as const] : []),
      ['idempotency_keys', new Date(at.getTime() - IDEMPOTENCY_KEPT_MS)] as const,
      ['dashboard_sessions', at] as const,
    ];
    for (const [table, cut] of expired) {
      const done = await drain(table, async () => {
        const n = await removeExpired(database.db, table, cut, batchSize);
        report.removed[table] += n;
        return { more: n === batchSize, removed: n };
      });
      if (!done) return end(false);
    }
    return end(!failed);
  }

  async function observed(): Promise<RetentionReport> {
    const report = await pass();
    options.onPass?.(report);
    if (Object.values(report.removed).some((n) => n > 0)) {
      log.info(
        {
          horizon: report.horizon?.toISOString() ?? null,
          removed: report.removed,
          batches: report.batches,
          complete: report.complete,
          ms: Math.round(report.ms),
        },
        'retention pass',
      );
    }
    return report;
  }

  const passes = oneAtATime(observed);
  const run = passes.run;

  const tick = () => {
    // A pass that outlasts the interval is not queued behind: the next tick looks again.
    if (passes.busy() !== undefined || stopping || database.health.state === 'down') return;
    run().catch((error: unknown) => log.error({ err: error }, 'retention pass failed'));
  };

  return {
    start() {
      if (intervalMs === 0 || timer !== undefined || stopping) return;
      timer = setTimeout(() => {
        tick();
        timer = setInterval(tick, intervalMs);
        timer.unref();
      }, firstDelayMs);
      timer.unref();
    },
    run,
    async stop() {
      stopping = true;
      clearTimeout(timer);
      clearInterval(timer);
      wake?.();
      await passes.busy();
    },
  };
}
