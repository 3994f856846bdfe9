import { sql } from 'kysely';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Database } from '../db/database.js';
import { scrapeQuery } from './metrics.js';
import { RETENTION_TABLES, type RetentionReport } from './retention.js';

/** A table of the sender's schema, as the storage gauges read it from the catalog. */
interface TableSize {
  table: string;
  bytes: number;
  /** The planner's estimate (`pg_class.reltuples`); -1 for a table never vacuumed nor analyzed. */
  rows: number;
}

/** What the retention pass reports to {@link registerStorageMetrics}'s metrics. */
export interface StorageMetrics {
  /** Counts a retention pass: its rows removed, its end. */
  observePass(report: RetentionReport): void;
}

/**
 * Adds the storage metrics to `registry`: each table's size on disk, indexes and TOAST included
 * (`payhook_table_bytes{table}`, `pg_total_relation_size`) and its estimated rows
 * (`payhook_table_rows_estimate{table}`, `pg_class.reltuples`; absent for a table never vacuumed
 * nor analyzed), read from the catalog at each scrape (never a `count(*)`); and this instance's
 * retention passes: when the last one ended (`payhook_retention_last_run_timestamp_seconds`, 0
 * before the first) and the rows they removed (`payhook_retention_removed_total{table}`).
 *
 * @example
 * ```ts
 * const storage = registerStorageMetrics(metrics.registry, database);
 * const retention = createRetention({ database, days: 30, onPass: storage.observePass });
 * ```
 */
export function registerStorageMetrics(registry: Registry, database: Database): StorageMetrics {
  // The two gauges of one scrape share one query.
  const read = async () =>
    (
      await sql<TableSize>`
        select c.relname as table, pg_total_relation_size(c.oid)::float8 as bytes, c.reltuples::float8 as rows
        from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
        where n.nspname = current_schema() and c.relkind in ('r', 'p') and c.relname not like 'kysely\\_%'
        order by c.relname`.execute(database.db)
    ).rows;
  const sizes = scrapeQuery<TableSize[]>(database, [], read);
  new Gauge({
    name: 'payhook_table_bytes',
    help: "Each of the sender's tables on disk, its indexes and TOAST included (pg_total_relation_size).",
    labelNames: ['table'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      for (const { table, bytes } of await sizes()) this.set({ table }, bytes);
    },
  });
  new Gauge({
    name: 'payhook_table_rows_estimate',
    help: "Each of the sender's tables' rows as the planner estimates them (pg_class.reltuples); absent for a table never vacuumed nor analyzed.",
    labelNames: ['table'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      for (const { table, rows } of await sizes()) if (rows >= 0) this.set({ table }, rows);
    },
  });
  const lastRun = new Gauge({
    name: 'payhook_retention_last_run_timestamp_seconds',
    help: "When this instance's last retention pass ended (Unix time; 0 before the first).",
    registers: [registry],
  });
  lastRun.set(0);
  const removed = new Counter({
    name: 'payhook_retention_removed_total',
    help: `Rows removed by this instance's retention passes, by table (${RETENTION_TABLES.join(', ')}).`,
    labelNames: ['table'] as const,
    registers: [registry],
  });
  for (const table of RETENTION_TABLES) removed.inc({ table }, 0);
  return {
    observePass(report) {
      lastRun.set(report.finishedAt.getTime() / 1000);
      for (const table of RETENTION_TABLES) removed.inc({ table }, report.removed[table]);
    },
  };
}
