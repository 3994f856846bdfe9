/**
 * pnpm bench:delivery — deliveries per second of the sender's delivery worker, on PostgreSQL and on
 * PGlite, side by side with a bare undici loop that posts the same bodies to the same receiver and
 * records nothing (the limit), plain and with the worker's signed headers; then the p50 and p99
 * of one claim of 32 with 10,000 and with 1,000,000 deliveries pending. Targets: the worker at
 * least 0.5x the bare loop on PostgreSQL, and the claim at 1,000,000 pending at most 2x its time at
 * 10,000.
 *
 * Method: BENCH_DELIVERIES deliveries (default 20,000; signed ~1 KB payloads) queued for one URL
 * of the delivery benchmarks' node:http receiver in a child process (delivery-fixtures.ts), then
 * `worker.runDue()` (`createDeliveryWorker`, 32 in flight, 32 per URL) until every one is
 * delivered; after a warm-up of 2,000, the bare loops and the worker run twice each, in turn, and
 * each side's faster run is its figure. CPU per delivery: this process, and on Linux the
 * PostgreSQL server's processes (from /proc). The claims are timed inside rolled-back
 * transactions (BENCH_CLAIMS of them, default 200), the pending rows added in bulk (PGlite: for at
 * most BENCH_PGLITE_FILL_S seconds).
 */
import { performance } from 'node:perf_hooks';
import { type Database, openDatabase } from '@payhook/sender';
import { claimDeliveries } from '@payhook/sender/internal';
import { sql } from 'kysely';
import {
  type BareRun,
  bareLoop,
  queueDeliveries,
  signedHeaders,
  startReceiver,
  timedClaims,
  workerRun,
} from './delivery-fixtures.js';
import { BENCH_DATABASE_URL as DATABASE_URL, onEachStorage, printTable, writeResults } from './lib.js';

const N = Number(process.env.BENCH_DELIVERIES ?? 20_000);
const WARMUP = 2000;
const CONCURRENCY = 32;
const CLAIMS = Number(process.env.BENCH_CLAIMS ?? 200);
const CLAIM_LIMIT = 32;
const PGLITE_FILL_S = Number(process.env.BENCH_PGLITE_FILL_S ?? 120);
const TARGET_THROUGHPUT = 0.5;
const TARGET_CLAIM = 2;

type Storage = 'postgres' | 'pglite';

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

/** The worker's claim query (worker.ts, no saturated URLs), timed inside rolled-back transactions. */
async function claimLatency(database: Database): Promise<ClaimLatency> {
  const { times, rows } = await timedClaims(database, CLAIMS, async (tx) => {
    const { claims } = await claimDeliveries(tx, { now: new Date(), leaseMs: 60_000, limit: CLAIM_LIMIT });
    return claims.length;
  });
  return { p50: quantile(times, 0.5), p99: quantile(times, 0.99), claimed: rows };
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

type Bare = { perSecond: number; runs: number[]; failed: number; cpuUs: number };

/** The faster of two bare runs, with both rates kept. */
const bestOf = (a: BareRun, b: BareRun): Bare => ({
  perSecond: Math.max(a.perSecond, b.perSecond),
  runs: [a.perSecond, b.perSecond],
  failed: a.failed + b.failed,
  cpuUs: Math.min(a.cpuUs, b.cpuUs),
});

type Result = {
  deliveries: number;
  bare: Bare;
  /** The bare loop with the worker's headers, signed for each request. */
  bareSigned: Bare;
  /** The worker against the signed bare loop (the same requests). */
  signedRatio: number;
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
    // The bulk fills of the claim sizes (250,000 rows a statement) may take longer than a
    // request's statement is allowed; nothing else the bench times comes near either bound.
    storage === 'postgres'
      ? { url: DATABASE_URL, schema: where, statementTimeoutMs: 300_000 }
      : { dataDir: where },
  );
  try {
    // Warm-up: both sides, on their own rows.
    const warm = await queueDeliveries(database, [url], WARMUP);
    await bareLoop(url, warm);
    await bareLoop(url, warm, signedHeaders);
    await workerRun(database, WARMUP, CONCURRENCY);

    const bodies = await queueDeliveries(database, [url], N);
    // Two runs of each side, in turn; the faster run of each is its figure.
    const bareBefore = await bareLoop(url, bodies);
    const signedBefore = await bareLoop(url, bodies, signedHeaders);
    const workerFirst = await workerRun(database, N, CONCURRENCY);
    const bareAfter = await bareLoop(url, bodies);
    const signedAfter = await bareLoop(url, bodies, signedHeaders);
    await queueDeliveries(database, [url], N);
    const workerSecond = await workerRun(database, N, CONCURRENCY);
    const best = workerSecond.perSecond > workerFirst.perSecond ? workerSecond : workerFirst;
    const worker = { ...best, runs: [workerFirst.perSecond, workerSecond.perSecond] };
    const bare = bestOf(bareBefore, bareAfter);
    const bareSigned = bestOf(signedBefore, signedAfter);
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
      bareSigned,
      worker,
      ratio: worker.perSecond / bare.perSecond,
      signedRatio: worker.perSecond / bareSigned.perSecond,
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
      (r.bare.perSecond / r.bareSigned.perSecond).toFixed(2),
      us(r.bare.cpuUs),
      '',
    ]);
    rows.push([
      label(storage),
      'bare loop, signed (worker headers)',
      Math.round(r.bareSigned.perSecond).toLocaleString('en-US'),
      (r.bareSigned.perSecond / r.bare.perSecond).toFixed(2),
      '1.00',
      us(r.bareSigned.cpuUs),
      '',
    ]);
    rows.push([
      label(storage),
      'worker.runDue()',
      Math.round(r.worker.perSecond).toLocaleString('en-US'),
      r.ratio.toFixed(2),
      r.signedRatio.toFixed(2),
      us(r.worker.cpuUs),
      // PGlite runs inside this process: its work is in the process's own figure.
      storage === 'postgres' ? us(r.worker.postgresCpuUs) : '(in process)',
    ]);
  }
  printTable(
    [
      'storage',
      'sender',
      'deliveries/s',
      'x bare',
      'x bare signed',
      'CPU/delivery',
      'PostgreSQL CPU/delivery',
    ],
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
        `${storage}: deliveries ${JSON.stringify(r.statuses)}, receiver answered ${r.received} requests, bare runs ${r.bare.runs.map(Math.round).join(' and ')}/s, signed bare runs ${r.bareSigned.runs.map(Math.round).join(' and ')}/s, worker runs ${r.worker.runs.map(Math.round).join(' and ')}/s, bare failures ${r.bare.failed + r.bareSigned.failed}`,
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
