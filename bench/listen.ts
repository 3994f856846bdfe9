/**
 * pnpm bench:listen — events per second from the sender to a local receiver through `payhook
 * listen`, side by side with the sender's own delivery worker posting to the same receiver, on
 * PostgreSQL and on PGlite. Target: the listener at least 0.5x the worker.
 *
 * Method: this process runs the sender's HTTP service (`buildApp`, with a test key) on a database
 * opened with `openDatabase` (PostgreSQL: a random schema, dropped at the end; PGlite: a temporary
 * directory); the receiver is the delivery benchmarks' node:http server in a child process
 * (delivery-fixtures.ts: reads each body, answers 200). The listener is the built CLI, `payhook
 * listen --api-key ... --base-url <the service> --forward-to <the receiver> --concurrency 32`, in
 * a child process of its own, started once and left connected: for each event the service reads
 * it from the events table, signs it and writes it on the stream; the listener posts it to the
 * receiver and reports the answer back (`POST /listen/attempts`, in batches), which the service
 * records as a delivery to `cli:<listener id>` with its attempt. A listen run inserts
 * BENCH_LISTEN_EVENTS events (default 5,000; signed ~1 KB payloads of realistic payments) in ONE
 * transaction, and is timed from its commit until every one of them has its `cli:` delivery
 * recorded (counted every 20 ms): sent, answered and recorded, as the worker's attempts are. A
 * worker run inserts as many events with one delivery each to the receiver, then times
 * `worker.runDue()` (`createDeliveryWorker`, concurrency 32, per-URL concurrency 32, as
 * bench:delivery). Each side has a warm-up of 1,000, then two timed runs taken in turn (worker,
 * listen, worker, listen); the faster of each side's two is its figure. CPU per event: this
 * process (the service, its stream and the recording; for the worker, the worker), and the
 * listener's process (from /proc on Linux).
 *
 * The packages are loaded as built (TSX_TSCONFIG_PATH=tsconfig.base.json), the CLI from
 * packages/cli/dist.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { buildApp, type Database, loadConfig, openDatabase } from '@payhook/sender';
import { queueDeliveries, startReceiver, workerRun } from './delivery-fixtures.js';
import {
  BENCH_BUSINESS_ID,
  BENCH_DATABASE_URL,
  onEachStorage,
  ownCpu,
  printTable,
  writeResults,
} from './lib.js';

const N = Number(process.env.BENCH_LISTEN_EVENTS ?? 5000);
const WARMUP = 1000;
const CONCURRENCY = 32;
const TARGET = 0.5;
const KEY = 'sk_test_bench_listen_0123456789';
const CLI = fileURLToPath(new URL('../packages/cli/dist/cli.js', import.meta.url));

/** CPU time of a child process so far, in µs, from /proc (Linux); undefined elsewhere. */
function childCpu(child: ChildProcess): number | undefined {
  if (process.platform !== 'linux' || child.pid === undefined) return undefined;
  try {
    const stat = readFileSync(`/proc/${child.pid}/stat`, 'utf8');
    const fields = (/^\d+ \(.*\) (.*)$/.exec(stat.trim())?.[1] ?? '').split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return undefined;
  }
}

/** Deliveries recorded for listeners so far. */
async function cliDeliveries(database: Database): Promise<number> {
  const row = await database.db
    .selectFrom('deliveries')
    .select((eb) => eb.fn.countAll().as('n'))
    .where('url', 'like', 'cli:%')
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

interface Run {
  perSecond: number;
  cpuUs: number;
  listenerCpuUs?: number;
}

/** Inserts `count` events in one transaction; times from its commit to their last `cli:` record. */
async function listenRun(database: Database, listener: ChildProcess, count: number): Promise<Run> {
  const before = await cliDeliveries(database);
  await database.db
    .transaction()
    .execute((tx) => queueDeliveries({ ...database, db: tx } as Database, [], count));
  const cpu0 = ownCpu();
  const child0 = childCpu(listener);
  const t0 = performance.now();
  while ((await cliDeliveries(database)) < before + count) {
    if (listener.exitCode !== null) throw new Error(`the listener exited (${listener.exitCode})`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const seconds = (performance.now() - t0) / 1000;
  const child1 = childCpu(listener);
  return {
    perSecond: count / seconds,
    cpuUs: (ownCpu() - cpu0) / count,
    ...(child0 !== undefined && child1 !== undefined ? { listenerCpuUs: (child1 - child0) / count } : {}),
  };
}

/** Queues `count` deliveries to the receiver and times `worker.runDue()` over them. */
async function directRun(database: Database, url: string, count: number): Promise<Run> {
  await queueDeliveries(database, [url], count);
  return workerRun(database, count, CONCURRENCY);
}

async function measure(storage: 'postgres' | 'pglite', where: string) {
  const database =
    storage === 'postgres'
      ? await openDatabase({ url: BENCH_DATABASE_URL, schema: where })
      : await openDatabase({ dataDir: where });
  const app = await buildApp({
    database,
    config: loadConfig({ PAYHOOK_API_KEYS: `${KEY}:${BENCH_BUSINESS_ID}:test` }),
    logger: false,
  });
  const base = await app.listen({ port: 0, host: '127.0.0.1' });
  const receiver = await startReceiver();
  const listener = spawn(
    process.execPath,
    [
      CLI,
      'listen',
      '--api-key',
      KEY,
      '--base-url',
      base,
      '--forward-to',
      `${receiver.origin}/`,
      '--concurrency',
      String(CONCURRENCY),
    ],
    { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, NO_COLOR: '1' } },
  );
  let out = '';
  listener.stdout?.on('data', (chunk: Buffer) => {
    if (out.length < 10_000) out += chunk;
  });
  try {
    while (!out.includes('Ready!')) {
      if (listener.exitCode !== null) throw new Error(`the listener exited: ${out}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    console.log(`${storage}: warming up (${WARMUP} each)`);
    await directRun(database, `${receiver.origin}/`, WARMUP);
    await listenRun(database, listener, WARMUP);
    const worker: Run[] = [];
    const listen: Run[] = [];
    for (let round = 0; round < 2; round++) {
      worker.push(await directRun(database, `${receiver.origin}/`, N));
      listen.push(await listenRun(database, listener, N));
      console.log(
        `${storage} round ${round + 1}: worker ${Math.round(worker.at(-1)?.perSecond ?? 0)}/s, listen ${Math.round(listen.at(-1)?.perSecond ?? 0)}/s`,
      );
    }
    const best = (runs: Run[]) => runs.reduce((a, b) => (b.perSecond > a.perSecond ? b : a));
    const w = best(worker);
    const l = best(listen);
    return { worker: w, listen: l, ratio: l.perSecond / w.perSecond };
  } finally {
    listener.kill('SIGINT');
    await new Promise((resolve) => listener.once('exit', resolve));
    await receiver.stop();
    await app.close();
    await database.close();
  }
}

const results = await onEachStorage('listen', measure);
console.log();
const us = (x: number | undefined) => (x === undefined ? 'n/a' : `${Math.round(x)} µs`);
const rows: string[][] = [];
for (const storage of ['postgres', 'pglite'] as const) {
  const r = results[storage];
  rows.push([
    storage,
    'worker (direct delivery)',
    Math.round(r.worker.perSecond).toLocaleString('en-US'),
    '1.00',
    us(r.worker.cpuUs),
    '',
  ]);
  rows.push([
    storage,
    'payhook listen --forward-to',
    Math.round(r.listen.perSecond).toLocaleString('en-US'),
    r.ratio.toFixed(2),
    us(r.listen.cpuUs),
    us(r.listen.listenerCpuUs),
  ]);
}
printTable(['storage', 'path', 'events/s', 'x worker', 'CPU/event (sender)', 'CPU/event (listener)'], rows);
for (const storage of ['postgres', 'pglite'] as const) {
  const ratio = results[storage].ratio;
  console.log(
    `${storage}: listen ${ratio.toFixed(2)}x the worker (target ${TARGET}x): ${ratio >= TARGET ? 'met' : 'NOT met'}`,
  );
}
console.log(
  `\nwrote ${writeResults('listen', { events: N, concurrency: CONCURRENCY, target: TARGET, ...results })}`,
);
