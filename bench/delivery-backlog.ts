/**
 * pnpm bench:delivery-backlog — the delivery worker with long backlogs, at the default limits (32
 * attempts in flight, 4 per URL), on PostgreSQL: what docs/decisions.md ("One URL's backlog")
 * reports. BENCH_BACKLOG deliveries (default 20,000) queued for fast local URLs, in each scenario:
 *
 * - many URLs (64): the reference, the rate every other row is a ratio of;
 * - one URL: all of them for one URL, which can only have 4 in flight at once. Target: at least
 *   0.8x the reference;
 * - slow URL ahead: a fifth as many due first for a URL that answers after 50 ms, then the backlog
 *   for ten fast URLs: the fast URLs' rate while the slow one holds all it may;
 * - 64 URLs, 10,000 more with a retry due later: the reference with 10,000 other URLs pending,
 *   not due (what a claim must not pay for);
 * - 10,000 URLs, all due: the backlog spread over 10,000 URLs, two rows each.
 *
 * Then the cost of one claim of 32 (p50 of 200, each rolled back): a URL at its limit with 20,000
 * due rows ahead of ten other URLs' rows, paced by the claim (the worker's claim now) against
 * skipped by a `url <> all(...)` filter (the claim before: it walks the backlog at every claim);
 * and 64 URLs due, with and without 10,000 other URLs pending.
 *
 * Method: the receiver is a node:http server on 127.0.0.1 in a child process
 * (delivery-fixtures.ts); paths under /slow answer after 50 ms, the others at once. Each run has a
 * schema of its own (dropped at the end): the rows are inserted in bulk, one event each (a signed
 * ~1 KB payment payload), then `createDeliveryWorker` with `createDeliveryClient({ allowPrivate:
 * true })` and the default limits is started and the table polled every 100 ms until every fast
 * delivery is delivered. A warm-up run, then ROUNDS rounds of every scenario in turn (the machine's
 * drift falls on all of them alike); each scenario's best run is reported, with the rate, the CPU
 * time per fast delivery of this process (the worker) and, on Linux with PostgreSQL on this
 * machine, of the server's processes (from /proc). BENCH_ONLY=<text> runs the reference and the
 * scenarios whose name holds the text, and skips the claim costs.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { createDeliveryClient, createDeliveryWorker, type Database, openDatabase } from '@payhook/sender';
import { claimDeliveries } from '@payhook/sender/internal';
import { sql } from 'kysely';
import { queueDeliveries, SLOW_MS, startReceiver, timedClaims } from './delivery-fixtures.js';
import { BENCH_DATABASE_URL, ownCpu, postgresCpu, printTable, writeResults } from './lib.js';

const BACKLOG = Number(process.env.BENCH_BACKLOG ?? 20_000);
const MANY = 64;
/** URLs pending but not due, in the scenario and the claim cost that measure what they cost. */
const WAITING_URLS = 10_000;
const ROUNDS = 3;
/** Claims timed per claim-cost case (after 10 of warm-up, see `timedClaims`). */
const CLAIMS = 200;

type Tx = Parameters<typeof claimDeliveries>[0];

interface Scenario {
  name: string;
  /** Queues the scenario's rows; returns the fast URLs, whose deliveries are counted. */
  queue(database: Database, origin: string): Promise<string[]>;
}

interface Run {
  delivered: number;
  perSecond: number;
  cpuUs: number;
  postgresCpuUs?: number;
}

const fastUrls = (origin: string, n: number) => Array.from({ length: n }, (_, i) => `${origin}/fast/${i}`);

/** `count` URLs with one delivery each, attempted once and due again in an hour. */
async function waitingUrls(database: Database, origin: string, count: number): Promise<void> {
  const [eventId] = await queueDeliveries(database, [], 1).then(() =>
    database.db.selectFrom('events').select('id').limit(1).execute(),
  );
  await sql`
    insert into deliveries (event_id, url, attempts, next_attempt_at)
    select ${eventId?.id}::uuid, ${origin} || '/waiting/' || i, 1, now() + interval '1 hour'
    from generate_series(1, ${count}::int) as i`.execute(database.db);
}

const all: Scenario[] = [
  {
    name: `many URLs (${MANY}): the reference`,
    async queue(database, origin) {
      const fast = fastUrls(origin, MANY);
      await queueDeliveries(database, fast, BACKLOG, new Date(Date.now() - 60_000));
      return fast;
    },
  },
  {
    name: 'one URL',
    async queue(database, origin) {
      const fast = fastUrls(origin, 1);
      await queueDeliveries(database, fast, BACKLOG, new Date(Date.now() - 60_000));
      return fast;
    },
  },
  {
    name: `slow URL ahead (${BACKLOG / 5} at ${SLOW_MS} ms), ten fast URLs`,
    async queue(database, origin) {
      const fast = fastUrls(origin, 10);
      await queueDeliveries(database, [`${origin}/slow`], BACKLOG / 5, new Date(Date.now() - 120_000));
      await queueDeliveries(database, fast, BACKLOG, new Date(Date.now() - 60_000));
      return fast;
    },
  },
  {
    name: `${MANY} URLs, ${WAITING_URLS.toLocaleString('en-US')} more with a retry due later`,
    async queue(database, origin) {
      await waitingUrls(database, origin, WAITING_URLS);
      const fast = fastUrls(origin, MANY);
      await queueDeliveries(database, fast, BACKLOG, new Date(Date.now() - 60_000));
      return fast;
    },
  },
  {
    name: `${WAITING_URLS.toLocaleString('en-US')} URLs, all due`,
    async queue(database, origin) {
      const fast = fastUrls(origin, WAITING_URLS);
      await queueDeliveries(database, fast, BACKLOG, new Date(Date.now() - 60_000));
      return fast;
    },
  },
];

/** BENCH_ONLY=<text>: the scenarios whose name holds it (the reference always runs). */
const scenarios = all.filter(
  (s, i) => i === 0 || !process.env.BENCH_ONLY || s.name.includes(process.env.BENCH_ONLY),
);

async function inSchema<T>(run: (database: Database) => Promise<T>): Promise<T> {
  const schema = `payhook_bench_${randomBytes(4).toString('hex')}`;
  const database = await openDatabase({ url: BENCH_DATABASE_URL, schema });
  try {
    return await run(database);
  } finally {
    await sql`drop schema if exists ${sql.id(schema)} cascade`.execute(database.db);
    await database.close();
  }
}

/** One run of `scenario` until `backlog` fast deliveries are delivered. */
async function throughput(scenario: Scenario, origin: string, backlog: number): Promise<Run> {
  return inSchema(async (database) => {
    const fast = await scenario.queue(database, origin);
    if (fast.length === 0) throw new Error(`${scenario.name}: no fast URL`);
    await sql`analyze deliveries`.execute(database.db);
    const client = createDeliveryClient({ allowPrivate: true });
    const worker = createDeliveryWorker({ database, client, pollIntervalMs: 100 });
    const cpu0 = ownCpu();
    const pg0 = postgresCpu();
    const t0 = performance.now();
    await worker.start();
    let delivered = 0;
    while (delivered < backlog) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      const row = await database.db
        .selectFrom('deliveries')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('status', '=', 'delivered')
        .where('url', 'like', `${origin}/fast/%`)
        .executeTakeFirstOrThrow();
      delivered = Number(row.n);
    }
    const seconds = (performance.now() - t0) / 1000;
    const cpuUs = (ownCpu() - cpu0) / delivered;
    const pg1 = postgresCpu();
    await worker.stop();
    await client.destroy();
    return {
      delivered,
      perSecond: delivered / seconds,
      cpuUs,
      ...(pg0 !== undefined && pg1 !== undefined ? { postgresCpuUs: (pg1 - pg0) / delivered } : {}),
    };
  });
}

/** The p50 (ms) of CLAIMS runs of `claim`, each rolled back, and the rows the last one reported. */
async function claimP50(
  database: Database,
  claim: (tx: Tx) => Promise<number>,
): Promise<{ p50: number; rows: number }> {
  const { times, rows } = await timedClaims(database, CLAIMS, claim);
  return { p50: times[Math.floor(times.length / 2)] as number, rows };
}

async function claimCosts(origin: string): Promise<{ case: string; p50Ms: number; rows: number }[]> {
  const out: { case: string; p50Ms: number; rows: number }[] = [];
  const limit = 32;
  await inSchema(async (database) => {
    // A URL at its limit with 20,000 due rows, due before 100 rows of ten other URLs.
    const busy = `${origin}/busy`;
    await queueDeliveries(database, [busy], 20_000, new Date(Date.now() - 120_000));
    await queueDeliveries(database, fastUrls(origin, 10), 100, new Date(Date.now() - 60_000));
    await sql`analyze deliveries`.execute(database.db);
    const paced = await claimP50(database, async (tx) => {
      const now = new Date();
      const r = await claimDeliveries(tx, {
        now,
        leaseMs: 60_000,
        limit,
        maxPerUrl: 16,
        paced: [{ url: busy, from: new Date(now.getTime() + 200), stepMs: 0.25 }],
      });
      return r.claims.length + (r.paced.get(busy)?.rows ?? 0);
    });
    out.push({
      case: 'a URL at its limit, 20,000 due rows ahead: paced (this claim)',
      p50Ms: paced.p50,
      rows: paced.rows,
    });
    // The claim before pacing: the URL left out by a filter, its whole backlog walked each time.
    const skipped = await claimP50(database, async (tx) => {
      const r = await sql<{ id: string }>`
        with due as (
          select id from deliveries
          where status = 'pending' and next_attempt_at <= ${new Date()} and url <> all(${[busy]}::text[])
          order by next_attempt_at limit ${limit} for update skip locked
        )
        update deliveries d set claim_token = gen_random_uuid(), next_attempt_at = now() + interval '1 minute'
        from due where d.id = due.id returning d.id`.execute(tx);
      return r.rows.length;
    });
    out.push({
      case: 'the same, the URL skipped by a filter (the claim before)',
      p50Ms: skipped.p50,
      rows: skipped.rows,
    });
  });
  for (const waiting of [0, WAITING_URLS]) {
    await inSchema(async (database) => {
      if (waiting > 0) await waitingUrls(database, origin, waiting);
      await queueDeliveries(database, fastUrls(origin, MANY), 2_000, new Date(Date.now() - 60_000));
      await sql`analyze deliveries`.execute(database.db);
      const r = await claimP50(database, async (tx) => {
        // As the worker claims: some URLs held already, with less room left.
        const rooms = new Map(fastUrls(origin, 8).map((url) => [url, 2]));
        const { claims } = await claimDeliveries(tx, {
          now: new Date(),
          leaseMs: 60_000,
          limit,
          maxPerUrl: 16,
          urlLimits: rooms,
        });
        return claims.length;
      });
      out.push({
        case: `${MANY} URLs due${waiting > 0 ? `, ${waiting.toLocaleString('en-US')} more with a retry due later` : ''}`,
        p50Ms: r.p50,
        rows: r.rows,
      });
    });
  }
  return out;
}

async function main(): Promise<void> {
  console.log(
    `${BACKLOG.toLocaleString('en-US')} deliveries queued for fast URLs, worker at its default limits ` +
      `(32 in flight, 4 per URL), PostgreSQL; ${ROUNDS} rounds after a warm-up\n`,
  );
  const receiver = await startReceiver();
  try {
    await throughput(scenarios[0] as Scenario, receiver.origin, 2_000);
    const runs = new Map<string, Run[]>(scenarios.map((s) => [s.name, []]));
    for (let round = 0; round < ROUNDS; round++) {
      for (const scenario of scenarios) {
        const run = await throughput(scenario, receiver.origin, BACKLOG);
        runs.get(scenario.name)?.push(run);
        console.log(`  round ${round + 1}: ${scenario.name}: ${Math.round(run.perSecond)}/s`);
      }
    }
    const best = (name: string) =>
      (runs.get(name) ?? []).reduce((a, b) => (b.perSecond > a.perSecond ? b : a));
    const reference = best((scenarios[0] as Scenario).name).perSecond;
    const rows = scenarios.map((s) => {
      const run = best(s.name);
      const ratio = run.perSecond / reference;
      return {
        scenario: s.name,
        ...run,
        runs: (runs.get(s.name) ?? []).map((r) => Math.round(r.perSecond)),
        ratio,
        ...(s.name === 'one URL' ? { target: ratio >= 0.8 ? 'met (0.8x)' : 'MISSED (0.8x)' } : {}),
      };
    });
    const us = (x: number | undefined) => (x === undefined ? 'n/a' : `${Math.round(x)} µs`);
    printTable(
      ['scenario', 'fast deliveries/s', 'x many URLs', 'CPU/delivery', 'PostgreSQL CPU/delivery', 'target'],
      rows.map((r) => [
        r.scenario,
        Math.round(r.perSecond).toLocaleString('en-US'),
        r.ratio.toFixed(2),
        us(r.cpuUs),
        us(r.postgresCpuUs),
        r.target ?? '',
      ]),
    );
    if (process.env.BENCH_ONLY) return;
    console.log('\nOne claim of 32 (rolled back), p50:\n');
    const claims = await claimCosts(receiver.origin);
    printTable(
      ['case', 'p50', 'rows taken or paced'],
      claims.map((c) => [c.case, `${c.p50Ms.toFixed(2)} ms`, String(c.rows)]),
    );
    const path = writeResults('delivery-backlog', { throughput: rows, claims });
    console.log(`\nresults written to ${path.replace(process.cwd(), '.')}`);
  } finally {
    await receiver.stop();
  }
}

await main();
