/**
 * pnpm bench:sandbox-soak — a sandbox that runs for weeks, compressed: BENCH_SOAK_DELIVERIES
 * deliveries (default 200,000) through the sender's own worker on PGlite, with the database's
 * maintenance off and on (at its default, a look every 10 s), side by side: the size of the data
 * directory and of each hot table, and the delivery rate, every BENCH_SOAK_STEP deliveries
 * (default 20,000), with the ratios on / off.
 *
 * Method: two services, each `startSender` (the service as `main.ts` starts it) on a fresh PGlite
 * data directory in a temporary folder (removed at the end), run in turn, a step of each, the first
 * of each pair alternating, so that both see the machine alike. Their workers post to the
 * benchmarks' local receiver, a node:http server on 127.0.0.1 in a child process
 * (delivery-fixtures.ts), with `createDeliveryClient({ allowPrivate: true })`, 32 attempts in
 * flight and 32 per URL (as in bench:delivery: one receiver URL), and no polling: `runDue()` drives
 * them. A step queues BENCH_SOAK_STEP events (a signed ~1 KB payment payload each) with one
 * delivery each, in bulk (`queueDeliveries`), then times `worker.runDue()` until all are delivered:
 * the step's deliveries/s, with whatever a VACUUM held up in that time. The maintained service's
 * passes are its own (`maintenance.run()`: the tables' counters, autovacuum's thresholds, a
 * statement per table and per VACUUM or ANALYZE), started every PAYHOOK_MAINTENANCE_INTERVAL_SECONDS (the default) of its
 * own steps' time, as its timer would: the clock stops while the other service works, since both
 * share this process, whose event loop a PGlite statement holds, and a pass still running at the
 * end of a step finishes before the other's step. After each step: the data directory's bytes
 * (every file, the WAL included), `pg_total_relation_size` of `deliveries`, `delivery_attempts`
 * and `events` (heap, indexes and TOAST), the dead rows of `deliveries`, and the VACUUMs and
 * ANALYZEs of the step with their time (`pg_stat_user_tables`). Before all this, a third service
 * delivers 5,000 and runs a pass, then goes, so that neither side pays for the code's first runs.
 * At the end, the unmaintained database gets one pass: what a first VACUUM of tables never
 * vacuumed costs.
 *
 * The sender is loaded as built: the script runs with TSX_TSCONFIG_PATH=tsconfig.base.json, whose
 * lack of `paths` resolves `@payhook/*` to the packages' `dist` (the receiver's child inherits it).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import {
  createDeliveryClient,
  type Database,
  loadConfig,
  type SenderService,
  startSender,
} from '@payhook/sender';
import { sql } from 'kysely';
import { queueDeliveries, startReceiver } from './delivery-fixtures.js';
import { directoryBytes, printTable, writeResults } from './lib.js';

const N = Number(process.env.BENCH_SOAK_DELIVERIES ?? 200_000);
const STEP = Math.min(N, Number(process.env.BENCH_SOAK_STEP ?? 20_000));
const CONCURRENCY = 32;
const WARMUP = 5000;
const TABLES = ['deliveries', 'delivery_attempts', 'events'] as const;
type Table = (typeof TABLES)[number];
/** What a maintenance pass did to one table (the sender's `TableMaintenance`). */
type TableMaintenance = Awaited<ReturnType<SenderService['maintenance']['run']>>['tables'][number];

interface TableStats {
  bytes: number;
  dead: number;
  vacuums: number;
  vacuumMs: number;
  analyzes: number;
  analyzeMs: number;
  autovacuums: number;
}

interface Step {
  delivered: number;
  /** deliveries/s of this step's `runDue()`. */
  perSecond: number;
  queueSeconds: number;
  diskBytes: number;
  /** Of which the write-ahead log (pg_wal). */
  walBytes: number;
  tables: Record<Table, TableStats>;
  /** VACUUMs and ANALYZEs run during the step, over every table, and their time in ms. */
  vacuums: number;
  analyzes: number;
  maintenanceMs: number;
}

async function tableStats(database: Database): Promise<Record<Table, TableStats>> {
  // PGlite's counters reach the view when its one backend flushes them: now.
  await sql`select pg_stat_force_next_flush()`.execute(database.db);
  const { rows } = await sql<TableStats & { table: Table }>`
    select relname as table, pg_total_relation_size(relid)::float8 as bytes, n_dead_tup::float8 as dead,
           vacuum_count::float8 as vacuums, total_vacuum_time::float8 as "vacuumMs",
           analyze_count::float8 as analyzes, total_analyze_time::float8 as "analyzeMs", autovacuum_count::float8 as autovacuums
    from pg_stat_user_tables where relname = any(${[...TABLES]}::text[])`.execute(database.db);
  return Object.fromEntries(rows.map(({ table, ...stats }) => [table, stats])) as Record<Table, TableStats>;
}

/** One sender on its own data directory, taken a step at a time. */
interface Sandbox {
  maintained: boolean;
  steps: Step[];
  /** Seconds of `runDue()` over every step. */
  seconds: number;
  /** Each statement of the maintenance's passes, with the deliveries made when it ran. */
  passes: (TableMaintenance & { delivered: number })[];
  /** Queues `count` deliveries and delivers them; the maintenance's clock runs meanwhile. */
  step(count: number): Promise<Step>;
  /** Deliveries delivered in all. */
  count(): Promise<number>;
  /** The maintenance's pass, now (with it off: what a first pass costs). */
  pass(): Promise<TableMaintenance[]>;
  close(): Promise<void>;
}

/**
 * Starts the service on a fresh data directory. Its maintenance is the service's own, checked every
 * PAYHOOK_MAINTENANCE_INTERVAL_SECONDS (its default) of this sandbox's working time: the clock runs
 * only during its own steps, so that no VACUUM of one sandbox runs while the other one works (both
 * share this process and its event loop, which PGlite's statements hold).
 */
async function openSandbox(maintained: boolean, origin: string, quiet = false): Promise<Sandbox> {
  const dir = await mkdtemp(join(tmpdir(), 'payhook-bench-soak-'));
  const dataDir = join(dir, 'data');
  const client = createDeliveryClient({ allowPrivate: true });
  const intervalMs = loadConfig({}).maintenanceIntervalSeconds * 1000;
  const service = await startSender({
    config: loadConfig({ PORT: '0', PAYHOOK_DATA_DIR: dataDir, PAYHOOK_MAINTENANCE_INTERVAL_SECONDS: '0' }),
    logger: false,
    worker: { client, concurrency: CONCURRENCY, perUrlConcurrency: CONCURRENCY, pollIntervalMs: 3_600_000 },
  });
  const { database, worker } = service;
  const url = `${origin}/webhooks`;
  let previous = await tableStats(database);
  /** This sandbox's working time since its maintenance last looked, in ms. */
  let sinceCheck = 0;
  let running: Promise<unknown> | undefined;
  const sandbox: Sandbox = {
    maintained,
    steps: [],
    seconds: 0,
    passes: [],
    async step(count) {
      let timer: NodeJS.Timeout | undefined;
      let armedAt = performance.now();
      const arm = (ms: number) => {
        armedAt = performance.now();
        timer = setTimeout(() => {
          sinceCheck = 0;
          // As the service's timer: a pass still running is not queued behind.
          const delivered = sandbox.steps.at(-1)?.delivered ?? 0;
          running ??= service.maintenance
            .run()
            .then((report) => {
              for (const t of report.tables) sandbox.passes.push({ ...t, delivered });
            })
            .finally(() => {
              running = undefined;
            });
          arm(intervalMs);
        }, ms);
      };
      if (maintained) arm(Math.max(0, intervalMs - sinceCheck));
      const q0 = performance.now();
      await queueDeliveries(database, [url], count);
      const queueSeconds = (performance.now() - q0) / 1000;
      const t0 = performance.now();
      const made = await worker.runDue();
      const s = (performance.now() - t0) / 1000;
      if (made !== count) throw new Error(`the worker made ${made} attempts, expected ${count}`);
      clearTimeout(timer);
      if (maintained) sinceCheck += performance.now() - armedAt;
      // A pass still running ends before the other sandbox's step begins.
      await running;
      sandbox.seconds += s;
      const tables = await tableStats(database);
      const delivered = (sandbox.steps.at(-1)?.delivered ?? 0) + count;
      const step: Step = {
        delivered,
        perSecond: count / s,
        queueSeconds,
        diskBytes: directoryBytes(dataDir),
        walBytes: directoryBytes(join(dataDir, 'pg_wal')),
        tables,
        vacuums: TABLES.reduce((n, t) => n + tables[t].vacuums - previous[t].vacuums, 0),
        analyzes: TABLES.reduce((n, t) => n + tables[t].analyzes - previous[t].analyzes, 0),
        maintenanceMs: TABLES.reduce(
          (ms, t) =>
            ms + tables[t].vacuumMs - previous[t].vacuumMs + tables[t].analyzeMs - previous[t].analyzeMs,
          0,
        ),
      };
      previous = tables;
      sandbox.steps.push(step);
      if (!quiet)
        console.log(
          `  maintenance ${maintained ? 'on ' : 'off'}: ${n(delivered)} delivered, ${n(step.perSecond)}/s, ` +
            `${mb(step.diskBytes)} MB on disk (WAL ${mb(step.walBytes)}), deliveries ${mb(tables.deliveries.bytes)} MB ` +
            `(${n(tables.deliveries.dead)} dead rows), ${step.vacuums} VACUUMs and ${step.analyzes} ANALYZEs (${n(step.maintenanceMs)} ms)`,
        );
      return step;
    },
    async count() {
      const row = await database.db
        .selectFrom('deliveries')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('status', '=', 'delivered')
        .executeTakeFirstOrThrow();
      return Number(row.n);
    },
    async pass() {
      return (await service.maintenance.run()).tables;
    },
    async close() {
      await service.close();
      await client.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
  return sandbox;
}

const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(1);
const x = (on: number, off: number) => (on / off).toFixed(2);
const n = (v: number) => Math.round(v).toLocaleString('en-US');

async function main(): Promise<void> {
  console.log(
    `${N.toLocaleString('en-US')} deliveries of ~1 KB signed payloads through the worker on PGlite, ` +
      `${STEP.toLocaleString('en-US')} at a time, ${CONCURRENCY} in flight to one local receiver; ` +
      'maintenance off and on, a step of each in turn\n',
  );
  const receiver = await startReceiver();
  // A warm-up on a sandbox of its own, so that neither side pays for the code's first runs.
  const warm = await openSandbox(true, receiver.origin, true);
  await warm.step(WARMUP);
  await warm.pass();
  await warm.close();
  const off = await openSandbox(false, receiver.origin);
  const on = await openSandbox(true, receiver.origin);
  let firstPass: Awaited<ReturnType<Sandbox['pass']>>;
  try {
    for (let delivered = 0, k = 0; delivered < N; k++) {
      const count = Math.min(STEP, N - delivered);
      // Each step on both, in turn, the first of a pair alternating: both see the machine alike.
      for (const sandbox of k % 2 === 0 ? [off, on] : [on, off]) await sandbox.step(count);
      delivered += count;
    }
    for (const sandbox of [off, on]) {
      const row = await sandbox.count();
      if (row !== N) throw new Error(`${row} deliveries delivered, expected ${N}`);
    }
    firstPass = await off.pass();
  } finally {
    await off.close();
    await on.close();
    console.log(`receiver answered ${n(await receiver.stop())} requests (warm-up included)`);
  }
  const offRate = N / off.seconds;
  const onRate = N / on.seconds;

  console.log(
    '\nSizes in MB (tables: pg_total_relation_size; disk: every file of the data directory, WAL included)\n',
  );
  printTable(
    [
      'delivered',
      'disk off',
      'disk on',
      'x',
      'WAL off',
      'on',
      'deliveries off',
      'on',
      'x',
      'attempts off',
      'on',
      'x',
      'events off',
      'on',
      'x',
    ],
    off.steps.map((a, i) => {
      const b = on.steps[i] as Step;
      const cells = [
        n(a.delivered),
        mb(a.diskBytes),
        mb(b.diskBytes),
        x(b.diskBytes, a.diskBytes),
        mb(a.walBytes),
        mb(b.walBytes),
      ];
      for (const t of TABLES)
        cells.push(mb(a.tables[t].bytes), mb(b.tables[t].bytes), x(b.tables[t].bytes, a.tables[t].bytes));
      return cells;
    }),
  );

  console.log('\nDelivery rate (deliveries/s of each step) and the maintenance done in the step\n');
  printTable(
    [
      'delivered',
      'rate off',
      'rate on',
      'x',
      'dead rows off',
      'dead rows on',
      'VACUUMs on',
      'ANALYZEs on',
      'their ms',
    ],
    off.steps.map((a, i) => {
      const b = on.steps[i] as Step;
      return [
        n(a.delivered),
        n(a.perSecond),
        n(b.perSecond),
        x(b.perSecond, a.perSecond),
        n(a.tables.deliveries.dead),
        n(b.tables.deliveries.dead),
        String(b.vacuums),
        String(b.analyzes),
        n(b.maintenanceMs),
      ];
    }),
  );

  const lastOff = off.steps.at(-1) as Step;
  const lastOn = on.steps.at(-1) as Step;
  const vacuums = on.steps.reduce((s, st) => s + st.vacuums, 0);
  const analyzes = on.steps.reduce((s, st) => s + st.analyzes, 0);
  const maintenanceMs = on.steps.reduce((s, st) => s + st.maintenanceMs, 0);
  const longest = on.passes.reduce<TableMaintenance | undefined>(
    (max, t) => (max === undefined || t.ms > max.ms ? t : max),
    undefined,
  );
  console.log(
    `\nover ${N.toLocaleString('en-US')} deliveries: rate off ${n(offRate)}/s, on ${n(onRate)}/s ` +
      `(x${x(onRate, offRate)}); disk at the end off ${mb(lastOff.diskBytes)} MB, ` +
      `on ${mb(lastOn.diskBytes)} MB (x${x(lastOn.diskBytes, lastOff.diskBytes)}); ` +
      `${vacuums} VACUUMs and ${analyzes} ANALYZEs with maintenance on, ${n(maintenanceMs)} ms in all, ` +
      'the longest statement ' +
      (longest ? `${n(longest.ms)} ms (${longest.action} ${longest.table})` : 'none'),
  );
  console.log('\nmaintenance on, every statement of its passes:');
  for (const t of on.passes)
    console.log(
      `  after ${n(t.delivered)} deliveries: ${t.action} ${t.table} ${n(t.ms)} ms (${n(t.deadRows)} dead rows)`,
    );
  console.log(
    `autovacuum runs without maintenance: ${TABLES.map((t) => lastOff.tables[t].autovacuums).reduce((a, b) => a + b, 0)}`,
  );
  console.log(
    `first pass on the never-vacuumed database at the end: ${firstPass
      .map((t) => `${t.action} ${t.table} ${n(t.ms)} ms (${n(t.deadRows)} dead rows)`)
      .join(', ')}`,
  );
  console.log(
    `\nresults written to ${writeResults('sandbox-soak', {
      deliveries: N,
      step: STEP,
      off: { perSecond: offRate, steps: off.steps, firstPass },
      on: { perSecond: onRate, steps: on.steps, passes: on.passes },
    }).replace(process.cwd(), '.')}`,
  );
}

await main();
