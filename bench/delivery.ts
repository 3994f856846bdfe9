/**
 * pnpm bench:delivery — webhook deliveries per second from one sender process to a fast local
 * receiver, side by side with a bare undici loop posting the same bodies to the same receiver (the
 * physical limit here), on PostgreSQL and on PGlite; and the latency of the worker's claim query
 * with 10,000 and with 1,000,000 pending deliveries in the table. Targets on PostgreSQL: the worker
 * at least 0.5x the bare loop's deliveries/s, and the claim's p50 at 1,000,000 pending within 2x
 * of its p50 at 10,000. On PGlite the figures are reported only.
 *
 * Method: the receiver is a node:http server on 127.0.0.1 in a child process
 * (delivery-fixtures.ts), so that it does not share the sender's event loop; it reads each body and
 * answers 200 with a tiny body. For each storage, this process opens the database with
 * `openDatabase` (PostgreSQL: a random schema made for the run and dropped at the end; PGlite: a
 * temporary directory removed at the end) and inserts BENCH_DELIVERIES events (default 20,000) with
 * one delivery each to the receiver, in bulk through Kysely; each event's payload is the
 * `signedPayload` of a realistic payment (`createTestPayment`, about 1 KB). The bare loop posts
 * those same bodies with an undici Agent, 32 in flight, checking every status is 200. The worker is
 * `createDeliveryWorker` with `createDeliveryClient({ allowPrivate: true })`, concurrency 32 and
 * perUrlConcurrency 32 (the default per-URL limit of 4 would cap a benchmark that has a single
 * receiver URL at 4 in flight), and the time of `worker.runDue()` over all the rows gives its
 * deliveries/s. Each side first runs a warm-up of 2,000 (bare first, then the worker), then two
 * timed runs, taken in turn (bare, worker, bare, worker: the worker's second run on as many new
 * rows), and the faster of its two runs is each side's figure: both sides are measured alike, with
 * their code as warm. Beside the rates, the table gives the CPU time each delivery cost this
 * process (the bare loop's client, or the worker with its database driver; PGlite's work included,
 * as it runs here) and, on Linux with PostgreSQL on this machine, the server's processes (from
 * /proc): on two shared cores, where the receiver and PostgreSQL take their share, those say where
 * the time goes. undici is not a dependency of bench/, so it is loaded from @payhook/sender's own
 * dependencies (createRequire), the same copy the delivery client uses.
 *
 * The sender is loaded as built: the script runs with TSX_TSCONFIG_PATH=tsconfig.base.json, whose
 * lack of `paths` resolves `@payhook/*` to the packages' `dist` (the receiver's child inherits it).
 *
 * Claim latency: the deliveries table is filled with pending rows due now, all referencing one
 * event (`insert ... select ... from generate_series`), then analyzed; the worker's claim
 * statement (`claimDeliveries` on the worker's connections, `database.delivery`: `with due as (...
 * for update skip locked) update ... returning`, limit 32, no saturated URLs) runs BENCH_CLAIMS
 * times (default 200), each in a transaction that is rolled back so that the table keeps its
 * size; p50 and p99 at 10,000, then at 1,000,000 pending.
 * On PGlite the table grows by 100,000 rows at a time and stops at 1,000,000 or when filling
 * exceeds BENCH_PGLITE_FILL_S seconds (default 120), whichever comes first; the size reached is
 * reported.
 */
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';
import { createDeliveryClient, createDeliveryWorker, type Database, openDatabase } from '@payhook/sender';
import { claimDeliveries } from '@payhook/sender/internal';
import { sql } from 'kysely';
import { queueDeliveries, startReceiver } from './delivery-fixtures.js';
import {
  BENCH_DATABASE_URL as DATABASE_URL,
  onEachStorage,
  ownCpu,
  postgresCpu,
  printTable,
  writeResults,
} from './lib.js';

const N = Number(process.env.BENCH_DELIVERIES ?? 20_000);
const WARMUP = 2000;
const CONCURRENCY = 32;
const CLAIMS = Number(process.env.BENCH_CLAIMS ?? 200);
const CLAIM_LIMIT = 32;
const PGLITE_FILL_S = Number(process.env.BENCH_PGLITE_FILL_S ?? 120);
const TARGET_THROUGHPUT = 0.5;
const TARGET_CLAIM = 2;

/** The few undici calls the bare loop makes (undici is loaded from the sender's dependencies). */
interface Undici {
  Agent: new (options?: { connections?: number | null }) => { close(): Promise<void> };
  request(
    url: string,
    options: { dispatcher: unknown; method: string; headers: Record<string, string>; body: string },
  ): Promise<{ statusCode: number; body: { text(): Promise<string> } }>;
}
const requireHere = createRequire(import.meta.url);
const undici = createRequire(requireHere.resolve('@payhook/sender/package.json'))('undici') as Undici;

type Storage = 'postgres' | 'pglite';

/** The bare loop: posts every body with undici, `CONCURRENCY` in flight; returns deliveries/s. */
async function bareLoop(
  url: string,
  bodies: readonly string[],
): Promise<{ perSecond: number; failed: number; cpuUs: number }> {
  const agent = new undici.Agent({ connections: null });
  let next = 0;
  let failed = 0;
  const cpu0 = ownCpu();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < bodies.length) {
        const body = bodies[next++] as string;
        const res = await undici.request(url, {
          dispatcher: agent,
          method: 'POST',
          headers: { 'content-type': 'application/json', 'user-agent': 'payhook-bench' },
          body,
        });
        await res.body.text();
        if (res.statusCode !== 200) failed++;
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const cpuUs = (ownCpu() - cpu0) / bodies.length;
  await agent.close();
  return { perSecond: bodies.length / seconds, failed, cpuUs };
}

/** The worker: `runDue()` over every pending row; returns deliveries/s and what the table says. */
async function workerRun(database: Database, count: number) {
  const client = createDeliveryClient({ allowPrivate: true });
  const worker = createDeliveryWorker({
    database,
    client,
    concurrency: CONCURRENCY,
    perUrlConcurrency: CONCURRENCY,
  });
  const cpu0 = ownCpu();
  const pg0 = postgresCpu();
  const t0 = performance.now();
  const made = await worker.runDue();
  const seconds = (performance.now() - t0) / 1000;
  const cpuUs = (ownCpu() - cpu0) / made;
  const pg1 = postgresCpu();
  await worker.stop();
  await client.close();
  if (made !== count) throw new Error(`the worker made ${made} attempts, expected ${count}`);
  return {
    perSecond: made / seconds,
    cpuUs,
    postgresCpuUs: pg0 === undefined || pg1 === undefined ? undefined : (pg1 - pg0) / made,
  };
}

async function countDeliveries(database: Database) {
  const rows = await database.db
    .selectFrom('deliveries')
    .select(['status', (eb) => eb.fn.countAll().as('n')])
    .groupBy('status')
    .execute();
  return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
}

const quantile = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;

class Rollback extends Error {}

/** The worker's claim query (worker.ts, no saturated URLs), timed inside rolled-back transactions. */
async function claimLatency(database: Database): Promise<ClaimLatency> {
  const times: number[] = [];
  let claimed = 0;
  for (let i = 0; i < CLAIMS + 10; i++) {
    const body = async (tx: Parameters<typeof claimDeliveries>[0]) => {
      const at = new Date();
      const t0 = performance.now();
      const rows = await claimDeliveries(tx, { now: at, leaseMs: 60_000, limit: CLAIM_LIMIT });
      const ms = performance.now() - t0;
      if (i >= 10) {
        times.push(ms); // the first 10 are a warm-up
        claimed = rows.length;
      }
      throw new Rollback();
    };
    // On the worker's connections, with its planner settings (on PGlite, `delivery` runs its
    // function in a transaction already).
    await database
      .delivery((db) => (db.isTransaction ? body(db) : db.transaction().execute(body)))
      .catch((error: unknown) => {
        if (!(error instanceof Rollback)) throw error;
      });
  }
  times.sort((a, b) => a - b);
  return { p50: quantile(times, 0.5), p99: quantile(times, 0.99), claimed };
}

/** Adds `count` pending rows due now, all referencing one event, with one INSERT ... SELECT. */
async function fillPending(database: Database, eventId: string, url: string, count: number): Promise<void> {
  await sql`
    insert into deliveries (event_id, url, next_attempt_at)
    select ${eventId}::uuid, ${url}, now() - interval '1 minute' from generate_series(1, ${count}::int)`.execute(
    database.db,
  );
}

type ClaimLatency = { p50: number; p99: number; claimed: number };
type ClaimRow = ClaimLatency & { pending: number; fillSeconds: number };

async function claimSizes(database: Database, storage: Storage, url: string): Promise<ClaimRow[]> {
  // What the throughput run left is delivered: the partial due index holds pending rows only.
  const eventId = (await database.db.selectFrom('events').select('id').limit(1).executeTakeFirstOrThrow()).id;
  const out: ClaimRow[] = [];
  let pending = 0;
  let fillSeconds = 0;
  const growTo = async (size: number, step: number, budgetS: number) => {
    while (pending < size && fillSeconds < budgetS) {
      const add = Math.min(step, size - pending);
      const t0 = performance.now();
      await fillPending(database, eventId, url, add);
      fillSeconds += (performance.now() - t0) / 1000;
      pending += add;
      process.stdout.write(
        `  ${storage}: ${pending.toLocaleString('en-US')} pending (${fillSeconds.toFixed(1)} s)\n`,
      );
    }
    await sql`analyze deliveries`.execute(database.db);
  };
  for (const size of [10_000, 1_000_000]) {
    await growTo(
      size,
      storage === 'pglite' ? 100_000 : 250_000,
      storage === 'pglite' ? PGLITE_FILL_S : Infinity,
    );
    out.push({ pending, fillSeconds, ...(await claimLatency(database)) });
  }
  return out;
}

type Result = {
  deliveries: number;
  bare: { perSecond: number; runs: number[]; failed: number; cpuUs: number };
  worker: { perSecond: number; runs: number[]; cpuUs: number; postgresCpuUs?: number };
  ratio: number;
  statuses: Record<string, number>;
  received: number;
  claim: ClaimRow[];
  claimRatio: number;
};

async function measure(storage: Storage, where: string): Promise<Result> {
  const receiver = await startReceiver();
  const url = `${receiver.origin}/webhooks`;
  const database = await openDatabase(
    storage === 'postgres' ? { url: DATABASE_URL, schema: where } : { dataDir: where },
  );
  try {
    // Warm-up: both sides, on their own rows.
    const warm = await queueDeliveries(database, [url], WARMUP);
    await bareLoop(url, warm);
    await workerRun(database, WARMUP);

    const bodies = await queueDeliveries(database, [url], N);
    // Two runs of each side, in turn; the faster run of each is its figure.
    const bareBefore = await bareLoop(url, bodies);
    const workerFirst = await workerRun(database, N);
    const bareAfter = await bareLoop(url, bodies);
    await queueDeliveries(database, [url], N);
    const workerSecond = await workerRun(database, N);
    const best = workerSecond.perSecond > workerFirst.perSecond ? workerSecond : workerFirst;
    const worker = { ...best, runs: [workerFirst.perSecond, workerSecond.perSecond] };
    const bare = {
      perSecond: Math.max(bareBefore.perSecond, bareAfter.perSecond),
      runs: [bareBefore.perSecond, bareAfter.perSecond],
      failed: bareBefore.failed + bareAfter.failed,
      cpuUs: Math.min(bareBefore.cpuUs, bareAfter.cpuUs),
    };
    const statuses = await countDeliveries(database);
    if (statuses.delivered !== 2 * N + WARMUP)
      throw new Error(`${storage}: ${JSON.stringify(statuses)} after the runs`);
    console.log(
      `${storage}: bare ${Math.round(bare.perSecond)}/s, worker ${Math.round(worker.perSecond)}/s; filling the queue`,
    );
    const claim = await claimSizes(database, storage, url);
    const [small, large] = claim as [ClaimRow, ClaimRow];
    return {
      deliveries: N,
      bare,
      worker,
      ratio: worker.perSecond / bare.perSecond,
      statuses,
      received: await receiver.stop(),
      claim,
      claimRatio: large.p50 / small.p50,
    };
  } finally {
    await database.close();
    await receiver.stop().catch(() => 0);
  }
}

const label = (storage: Storage) => (storage === 'postgres' ? 'PostgreSQL' : 'PGlite');
const ms = (x: number) => `${x.toFixed(2)} ms`;

async function main(): Promise<void> {
  console.log(
    `${N.toLocaleString('en-US')} deliveries of ~1 KB signed payloads to one local receiver, ` +
      `${CONCURRENCY} in flight (worker perUrlConcurrency ${CONCURRENCY}); claim query x${CLAIMS}, limit ${CLAIM_LIMIT}\n`,
  );
  const results = await onEachStorage('delivery', measure);

  console.log();
  const rows: string[][] = [];
  for (const storage of ['postgres', 'pglite'] as const) {
    const r = results[storage];
    if (!r) continue;
    const us = (x: number | undefined) => (x === undefined ? 'n/a' : `${Math.round(x)} µs`);
    rows.push([
      label(storage),
      'bare undici loop',
      Math.round(r.bare.perSecond).toLocaleString('en-US'),
      '1.00',
      us(r.bare.cpuUs),
      '',
    ]);
    rows.push([
      label(storage),
      'worker.runDue()',
      Math.round(r.worker.perSecond).toLocaleString('en-US'),
      r.ratio.toFixed(2),
      us(r.worker.cpuUs),
      // PGlite runs inside this process: its work is in the process's own figure.
      storage === 'postgres' ? us(r.worker.postgresCpuUs) : '(in process)',
    ]);
  }
  printTable(
    ['storage', 'sender', 'deliveries/s', 'x bare', 'CPU/delivery', 'PostgreSQL CPU/delivery'],
    rows,
  );

  console.log();
  const claimRows: string[][] = [];
  for (const storage of ['postgres', 'pglite'] as const) {
    const r = results[storage];
    if (!r) continue;
    for (const c of r.claim) {
      claimRows.push([
        label(storage),
        c.pending.toLocaleString('en-US'),
        `${c.fillSeconds.toFixed(1)} s`,
        ms(c.p50),
        ms(c.p99),
        String(c.claimed),
        (c.p50 / (r.claim[0] as ClaimRow).p50).toFixed(2),
      ]);
    }
  }
  printTable(['storage', 'pending', 'filled in', 'claim p50', 'claim p99', 'rows', 'x p50'], claimRows);
  for (const storage of ['postgres', 'pglite'] as const) {
    const r = results[storage];
    if (r)
      console.log(
        `${storage}: deliveries ${JSON.stringify(r.statuses)}, receiver answered ${r.received} requests, bare runs ${r.bare.runs.map(Math.round).join(' and ')}/s, worker runs ${r.worker.runs.map(Math.round).join(' and ')}/s, bare failures ${r.bare.failed}`,
      );
  }
  console.log(`\nresults written to ${writeResults('delivery', results).replace(process.cwd(), '.')}`);

  const pgResult = results.postgres;
  if (!pgResult) return;
  const misses: string[] = [];
  if (pgResult.ratio < TARGET_THROUGHPUT)
    misses.push(
      `worker ${pgResult.ratio.toFixed(2)}x the bare loop's deliveries/s (target ${TARGET_THROUGHPUT}x)`,
    );
  if (pgResult.claimRatio > TARGET_CLAIM)
    misses.push(
      `claim p50 at 1,000,000 pending ${pgResult.claimRatio.toFixed(2)}x that at 10,000 (target ${TARGET_CLAIM}x)`,
    );
  if (misses.length === 0)
    console.log(
      `\nPostgreSQL targets met: worker ${pgResult.ratio.toFixed(2)}x the bare loop (target ${TARGET_THROUGHPUT}x), ` +
        `claim p50 ${pgResult.claimRatio.toFixed(2)}x from 10,000 to 1,000,000 pending (target ${TARGET_CLAIM}x)`,
    );
  else console.log(`\nbelow target:\nPostgreSQL: ${misses.join('\nPostgreSQL: ')}`);
}

await main();
