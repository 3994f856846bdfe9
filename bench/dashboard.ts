/**
 * pnpm bench:dashboard — what the dashboard costs.
 *
 * 1. The events list with 100,000 events: the dashboard's first page (`GET /dashboard/events`,
 *    25 rows, rendered HTML) against the JSON API's `GET /events?limit=25` for the same page, one
 *    request at a time over a keep-alive connection, in paired rounds (each round times both, in
 *    turn). Target: the page under 2x the JSON API's time. On PostgreSQL (a schema made for the
 *    run and dropped) and PGlite (a temporary directory).
 * 2. Delivery with 50 open dashboards: the worker delivers BENCH_LIVE_DELIVERIES (default 50,000)
 *    queued deliveries to a loopback receiver (a child process) with 0 or 50 dashboards connected
 *    to `/dashboard/live`, in alternating runs, each from empty tables. The dashboards run in another child process and do
 *    what the page's script does: each holds a live stream and, on a message, reloads the events
 *    list at most every 2 s (as a live refresh). Each run has its own sender app (so no stream or feed outlives it).
 *    Target: delivery at most 5% slower with the dashboards open (median of the pairs). PostgreSQL.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import {
  buildApp,
  createAttemptFeed,
  createDeliveryClient,
  createDeliveryWorker,
  type Database,
  loadConfig,
  openDatabase,
} from '@payhook/sender';
import { sql } from 'kysely';
import pg from 'pg';
import { queueDeliveries, startReceiver, undici } from './delivery-fixtures.js';
import {
  BENCH_BUSINESS_ID,
  BENCH_DATABASE_URL,
  fmt,
  onEachStorage,
  ownCpu,
  pairedRatio,
  postgresCpu,
  printTable,
  signIn,
  writeResults,
} from './lib.js';

const KEY = 'sk_test_bench_dashboard_key_0001';
const EVENTS = Number(process.env.BENCH_EVENTS ?? 100_000);
const LIVE_DELIVERIES = Number(process.env.BENCH_LIVE_DELIVERIES ?? 50_000);
const DASHBOARDS = Number(process.env.BENCH_DASHBOARDS ?? 50);
/** BENCH_RELOAD=0: the dashboards hold their streams but never reload (to tell the two costs apart). */
const RELOAD = process.env.BENCH_RELOAD !== '0';
const PAIRS = Number(process.env.BENCH_PAIRS ?? 5);
const config = () =>
  loadConfig({ PAYHOOK_API_KEYS: `${KEY}:${BENCH_BUSINESS_ID}:test`, LOG_LEVEL: 'silent' });

/** Part 1 on one storage: ms per request of each, and the page's time over the API's. */
async function listPage(storage: 'postgres' | 'pglite', where: string) {
  const database =
    storage === 'postgres'
      ? await openDatabase({ url: BENCH_DATABASE_URL, schema: where })
      : await openDatabase({ dataDir: where });
  try {
    console.log(`${storage}: inserting ${EVENTS.toLocaleString('en-US')} events with a delivery each...`);
    await queueDeliveries(database, ['https://merchant.example/webhooks'], EVENTS);
    await sql`analyze`.execute(database.db);
    const app = await buildApp({ database, config: config(), logger: false });
    const base = await app.listen({ port: 0, host: '127.0.0.1' });
    const cookie = await signIn(base, KEY);
    const agent = new undici.Agent({ connections: 1 });
    const get = (path: string, headers: Record<string, string>) => async () => {
      const response = await undici.request(`${base}${path}`, {
        dispatcher: agent,
        method: 'GET',
        headers,
        body: '',
      });
      if (response.statusCode !== 200) throw new Error(`${path}: ${response.statusCode}`);
      return response.body.text();
    };
    const json = get('/events?limit=25', { authorization: `Bearer ${KEY}` });
    const page = get('/dashboard/events', { cookie });
    if (!(await page()).includes('Newest first: 25 on this page.'))
      throw new Error('the page is not the first 25');
    // The JSON API's requests/s over the page's: the page's time over the API's.
    const ratio = await pairedRatio(page, json, { roundMs: 1000, rounds: 9 });
    const time = async (fn: () => Promise<unknown>) => {
      const t0 = performance.now();
      for (let i = 0; i < 40; i++) await fn();
      return (performance.now() - t0) / 40;
    };
    const jsonMs = await time(json);
    const pageMs = await time(page);
    await agent.close();
    await app.close();
    return { jsonMs, pageMs, pageOverJson: ratio };
  } finally {
    await database.close();
  }
}

/** Child process: `DASHBOARDS` dashboards on `base` with `cookie`, each as the page's script behaves. */
async function dashboards(base: string, cookie: string): Promise<void> {
  let messages = 0;
  let reloads = 0;
  const controller = new AbortController();
  const open = async () => {
    const response = await fetch(`${base}/dashboard/live`, {
      headers: { cookie },
      signal: controller.signal,
    });
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    let last = 0;
    let reloading = false;
    const reload = async () => {
      reloading = true;
      // As the page's script: a random part of up to 500 ms spreads the pages that got the same message.
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 500));
      last = Date.now();
      await (
        await fetch(`${base}/dashboard/events`, { headers: { cookie, 'x-payhook-refresh': 'live' } })
      ).text();
      reloads++;
      reloading = false;
    };
    const decoder = new TextDecoder();
    void (async () => {
      for (;;) {
        const chunk = await reader.read().catch(() => ({ done: true, value: undefined }));
        if (chunk.done) return;
        const text = decoder.decode(chunk.value);
        const n = text.split('event: attempts').length - 1;
        messages += n;
        if (n > 0 && RELOAD && !reloading && Date.now() - last >= 2000) void reload().catch(() => {});
      }
    })();
  };
  await Promise.all(Array.from({ length: DASHBOARDS }, open));
  const connected = process.cpuUsage();
  process.stdout.write(`${JSON.stringify({ connected: DASHBOARDS })}\n`);
  process.once('SIGTERM', () => {
    controller.abort();
    const { user, system } = process.cpuUsage(connected);
    process.stdout.write(`${JSON.stringify({ messages, reloads, clientCpuUs: user + system })}\n`);
    process.exit(0);
  });
}

/** Starts the dashboards' child process; resolves once all are connected. */
async function startDashboards(base: string, cookie: string) {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(import.meta.url), 'dashboards', base, cookie],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => JSON.parse((await lines.next()).value as string) as Record<string, number>;
  await next();
  return {
    async stop() {
      const counts = next();
      child.kill('SIGTERM');
      return counts;
    },
  };
}

/** One delivery run with `open` dashboards: deliveries/s, and what the dashboards did. */
async function deliveryRun(database: Database, origin: string, open: number) {
  // Every run starts from the same empty tables: a run never pays for the rows of the ones before.
  await sql`truncate delivery_attempts, deliveries, events`.execute(database.db);
  const feed = createAttemptFeed();
  const app = await buildApp({ database, config: config(), logger: false, feed });
  const base = await app.listen({ port: 0, host: '127.0.0.1' });
  await queueDeliveries(database, [`${origin}/`], LIVE_DELIVERIES);
  const clients = open > 0 ? await startDashboards(base, await signIn(base, KEY)) : undefined;
  const client = createDeliveryClient({ allowPrivate: true });
  const worker = createDeliveryWorker({ database, client, concurrency: 32, perUrlConcurrency: 32, feed });
  const cpu0 = ownCpu();
  const pg0 = postgresCpu();
  const t0 = performance.now();
  const made = await worker.runDue();
  const perSecond = made / ((performance.now() - t0) / 1000);
  const cpuUs = (ownCpu() - cpu0) / made;
  const pg1 = postgresCpu();
  const pgCpuUs = pg0 === undefined || pg1 === undefined ? undefined : (pg1 - pg0) / made;
  await worker.stop();
  await client.close();
  const counts: Record<string, number> = (await clients?.stop()) ?? { messages: 0, reloads: 0 };
  await app.close();
  if (made !== LIVE_DELIVERIES) throw new Error(`made ${made} attempts, expected ${LIVE_DELIVERIES}`);
  const seconds = made / perSecond;
  return {
    perSecond,
    cpuUs,
    pgCpuUs,
    messages: counts.messages ?? 0,
    reloads: counts.reloads ?? 0,
    /** The simulated browsers' process: its share of one core over the run (it shares this machine). */
    clientCores: (counts.clientCpuUs ?? 0) / 1e6 / seconds,
  };
}

/** Part 2: alternating runs without and with the dashboards. */
async function liveDelivery() {
  const schema = `payhook_bench_live_${process.pid}`;
  const database = await openDatabase({ url: BENCH_DATABASE_URL, schema });
  const receiver = await startReceiver();
  try {
    type Run = Awaited<ReturnType<typeof deliveryRun>>;
    const pairs: { without: Run; with: Run }[] = [];
    await deliveryRun(database, receiver.origin, 0); // warm-up
    for (let i = 0; i < PAIRS; i++) {
      // Which side runs first alternates, so neither always runs on a warmer or colder machine.
      const first = await deliveryRun(database, receiver.origin, i % 2 === 0 ? 0 : DASHBOARDS);
      const second = await deliveryRun(database, receiver.origin, i % 2 === 0 ? DASHBOARDS : 0);
      const [without, withOpen] = i % 2 === 0 ? [first, second] : [second, first];
      pairs.push({ without, with: withOpen });
      console.log(
        `pair ${i + 1}: ${fmt(without.perSecond)}/s without, ${fmt(withOpen.perSecond)}/s with ${DASHBOARDS} dashboards (${withOpen.messages} messages, ${withOpen.reloads} reloads; the browsers' process used ${(withOpen.clientCores * 100).toFixed(0)} % of a core)`,
      );
    }
    const median = (values: number[]) =>
      [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)] as number;
    const cpu = (r: Run) => r.cpuUs + (r.pgCpuUs ?? 0);
    return {
      pairs,
      medianSlowdown: median(pairs.map((p) => 1 - p.with.perSecond / p.without.perSecond)),
      /** The sender's and PostgreSQL's CPU per delivery with the dashboards over without (their browsers' excluded). */
      medianCpuRatio: median(pairs.map((p) => cpu(p.with) / cpu(p.without))),
    };
  } finally {
    await receiver.stop();
    await database.close();
    const client = new pg.Client({ connectionString: BENCH_DATABASE_URL });
    await client.connect();
    await client.query(`drop schema if exists ${schema} cascade`);
    await client.end();
  }
}

async function main() {
  const list = await onEachStorage('dashboard', listPage);
  printTable(
    ['storage', 'GET /events (JSON) ms', 'GET /dashboard/events ms', 'page / JSON (paired)'],
    (['postgres', 'pglite'] as const).map((s) => [
      s,
      list[s].jsonMs.toFixed(2),
      list[s].pageMs.toFixed(2),
      `${list[s].pageOverJson.toFixed(2)}x`,
    ]),
  );
  const live = await liveDelivery();
  const us = (n: number | undefined) => (n === undefined ? '-' : n.toFixed(0));
  printTable(
    [
      'pair',
      'deliveries/s, none',
      `with ${DASHBOARDS}`,
      'slower by',
      'CPU µs/delivery: sender, PG (none)',
      `(with ${DASHBOARDS})`,
    ],
    live.pairs.map((p, i) => [
      String(i + 1),
      fmt(p.without.perSecond),
      fmt(p.with.perSecond),
      `${((1 - p.with.perSecond / p.without.perSecond) * 100).toFixed(1)} %`,
      `${us(p.without.cpuUs)}, ${us(p.without.pgCpuUs)}`,
      `${us(p.with.cpuUs)}, ${us(p.with.pgCpuUs)}`,
    ]),
  );
  console.log(`median slowdown: ${(live.medianSlowdown * 100).toFixed(1)} % (target at most 5 %)`);
  console.log(
    `median CPU per delivery (sender and PostgreSQL), with over without: ${live.medianCpuRatio.toFixed(3)}x`,
  );
  const file = writeResults('dashboard', {
    events: EVENTS,
    list: Object.fromEntries(
      Object.entries(list).map(([s, r]) => [
        s,
        { jsonMs: r.jsonMs, pageMs: r.pageMs, pageOverJson: r.pageOverJson },
      ]),
    ),
    live: { deliveries: LIVE_DELIVERIES, dashboards: DASHBOARDS, ...live },
  });
  console.log(`results: ${file}`);
}

if (process.argv[2] === 'dashboards') await dashboards(process.argv[3] as string, process.argv[4] as string);
else await main();
