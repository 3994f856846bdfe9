/**
 * pnpm bench:history — the sender's calls on an empty database, then on one holding a provider's
 * first two weeks, side by side in one run: BENCH_HISTORY_EVENTS events (default 3,000,000; two
 * thirds of one business over 14 days, the rest spread over BENCH_HISTORY_BUSINESSES others,
 * default 1,000), two deliveries each and about 1.13 attempts a delivery, then VACUUM ANALYZE.
 * Each call is made BENCH_HISTORY_REPEAT times (default 5) and its median and largest time
 * reported; the latency row creates sessions at BENCH_HISTORY_RATE a second (default 200) for
 * BENCH_HISTORY_LATENCY_SECONDS (default 15).
 *
 * Method: two databases of their own on TEST_DATABASE_URL's server (dropped at the end, also on
 * a failure), and `payhook serve` (the built CLI, at its default timeouts) in a child process on
 * each in turn, every call through its HTTP API. The empty side: a fresh database migrated by the
 * sender (`openDatabase`), with only what the run makes (the big business's two endpoints, through
 * the API, and the latency row's sessions). The history side: the sender's first release's
 * migrations (0001 to 0013), the rows seeded by SQL shaped like the sender's (history-seed.ts),
 * VACUUM ANALYZE, then the sender's own later migrations (timed, as the upgrade) and ANALYZE. Per
 * side, in this order:
 * - start: `payhook serve` started 3 times, from the spawn to the first `GET /healthz` 200;
 * - latency: sessions created open loop at the rate, from each 201 to its event at this process's
 *   receiver, p99; then the deliveries due are left to drain;
 * - `GET /events` first page, and 1,000 events deep (the cursor found by paging); `GET
 *   /events?payment_id=` for the business's newest and oldest payment, and
 *   `?delivery_status=` failed, pending and none (the rare statuses); the dashboard (signed in
 *   with the key): an endpoint's page and its charts, the endpoints list and each URL's 24 hours;
 *   `GET /metrics`;
 * - `DELETE /webhook-endpoints/{id}` of an endpoint made for it, with BENCH_HISTORY_PENDING
 *   (default 500) pending deliveries;
 * - `POST /webhook-endpoints/{id}/recover` since 13 days ago on the big business's first endpoint,
 *   a fresh Idempotency-Key each time: the first queues the window's failures, the others none;
 * - last, a backlog: BENCH_HISTORY_BACKLOG (default 200,000) pending deliveries of the big business
 *   (its newest events, to an endpoint made for it: its URL down for hours), not due for an hour;
 *   then `GET /events?delivery_status=pending` of a small business (its own API key), whose list
 *   must not read another business's backlog.
 * An answer not as expected (a 503, a timeout) is counted with its error code, never fatal; the
 * sender's log is read for its 5xx answers and errors.
 */
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '@payhook/sender';
import pg from 'pg';
import { sessionRequest } from '../packages/sender/test/fixtures/requests.js';
import { migrateToFirstRelease, type SeededEndpoint, seedHistory, seedPending } from './history-seed.js';
import {
  BENCH_DATABASE_URL,
  createSessionsAtRate,
  latencyOf,
  makeDatabase,
  now,
  printTable,
  signIn,
  sleep,
  startReceiver,
  startServe,
  stopServe,
  writeResults,
} from './lib.js';

const EVENTS = Number(process.env.BENCH_HISTORY_EVENTS ?? 3_000_000);
const BUSINESSES = Number(process.env.BENCH_HISTORY_BUSINESSES ?? 1000);
const REPEAT = Number(process.env.BENCH_HISTORY_REPEAT ?? 5);
const RATE = Number(process.env.BENCH_HISTORY_RATE ?? 200);
const LATENCY_SECONDS = Number(process.env.BENCH_HISTORY_LATENCY_SECONDS ?? 15);
const PENDING = Number(process.env.BENCH_HISTORY_PENDING ?? 500);
const BACKLOG = Number(process.env.BENCH_HISTORY_BACKLOG ?? 200_000);
const DAYS = 14;
const STARTS = 3;
const KEY = 'sk_test_bench_history';
const BUSINESS = 'biz-bench-history';
const auth = { authorization: `Bearer ${KEY}` };
/** A small business of the seeded history (history-seed.ts names them so), and its key. */
const SMALL = 'biz-hist-0001';
const SMALL_KEY = 'sk_test_bench_history_small';
const json = { ...auth, 'content-type': 'application/json' };

/** One timed call: its time in ms, its status (0: no answer within 2 minutes) and its body. */
type Sample = { ms: number; status: number; body?: string };

/** A call's figures on one side: the median and largest time, the answers not expected by status and error code. */
interface Summary {
  medianMs: number;
  maxMs: number;
  runs: number;
  failed: Record<string, number>;
  codes?: string[];
}

async function call(method: string, url: string, headers: Record<string, string>, body?: unknown) {
  const t = now();
  try {
    const res = await fetch(url, {
      method,
      headers,
      redirect: 'manual',
      signal: AbortSignal.timeout(120_000),
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { ms: now() - t, status: res.status, body: text };
  } catch {
    return { ms: now() - t, status: 0 };
  }
}

function summary(samples: Sample[], expected: number): Summary {
  const ms = samples.map((s) => s.ms).sort((a, b) => a - b);
  const failed: Record<string, number> = {};
  for (const { status } of samples)
    if (status !== expected) failed[status || 'no answer'] = (failed[status || 'no answer'] ?? 0) + 1;
  // Of an even count, the mean of the middle two.
  const median =
    ((ms[Math.floor((ms.length - 1) / 2)] as number) + (ms[Math.ceil((ms.length - 1) / 2)] as number)) / 2;
  const codes = new Set(
    samples.filter((x) => x.status !== expected).map((x) => /"code":"(\w+)"/.exec(x.body ?? '')?.[1] ?? '-'),
  );
  return {
    medianMs: round(median),
    maxMs: round(ms.at(-1) ?? Number.NaN),
    runs: ms.length,
    failed,
    ...(codes.size > 0 ? { codes: [...codes] } : {}),
  };
}

/** `fn` once to warm up, then REPEAT times, one after the other. */
async function timed(fn: () => Promise<Sample>, expected = 200): Promise<Summary> {
  await fn();
  const samples: Sample[] = [];
  for (let i = 0; i < REPEAT; i++) samples.push(await fn());
  return summary(samples, expected);
}

const log = (line: string) => console.error(line);
const round = (ms: number) => Math.round(ms * 100) / 100;

/** The 5xx answers the sender logged, by status, its error lines, and the first few of their messages. */
function readLogs(dir: string, side: string) {
  const answers: Record<string, number> = {};
  let errors = 0;
  const messages = new Set<string>();
  for (const file of readdirSync(dir).filter((f) => f.startsWith(`serve-${side}-`)))
    for (const line of readFileSync(join(dir, file), 'utf8').split('\n')) {
      const status = /"statusCode":(5\d\d)/.exec(line)?.[1];
      if (status) answers[status] = (answers[status] ?? 0) + 1;
      if (/"level":[56]0/.test(line)) {
        errors++;
        const msg = /"msg":"([^"]{0,160})/.exec(line)?.[1];
        if (msg && messages.size < 5) messages.add(msg);
      }
    }
  return { answers5xx: answers, errorLines: errors, messages: [...messages] };
}

interface Context {
  dir: string;
  databaseUrl: string;
  client: pg.Client;
  origin: string;
  arrived: Map<string, number>;
  endpoints?: [SeededEndpoint, SeededEndpoint];
}

/** Every call of the table on the database as it is: one side of the run. */
async function side(name: 'empty' | 'history', ctx: Context) {
  const calls: Record<string, Summary> = {};
  const env = { PAYHOOK_API_KEYS: `${KEY}:${BUSINESS}:test,${SMALL_KEY}:${SMALL}:test` };
  const args = ['--database-url', ctx.databaseUrl];
  const starts: Sample[] = [];
  // The machine is shared: its load (1-minute average, on its cores) says how far to trust a side.
  const load = [loadavg()[0] as number];
  let serve: Awaited<ReturnType<typeof startServe>> | undefined;
  try {
    for (let i = 0; i < STARTS; i++) {
      const t = now();
      serve = await startServe(args, join(ctx.dir, `serve-${name}-${i}.log`), env);
      let status = 0;
      while (status !== 200 && now() - t < 60_000) {
        status = (await call('GET', `${serve.base}/healthz`, {})).status;
        if (status !== 200) await sleep(10);
      }
      starts.push({ ms: now() - t, status });
      if (i < STARTS - 1) await stopServe(serve);
    }
    calls.start = summary(starts, 200);
    const base = (serve as { base: string }).base;
    log(`${name}: started in ${calls.start.medianMs.toFixed(0)} ms (median of ${STARTS})`);
    const makeEndpoint = async (url: string) => {
      const r = await call('POST', `${base}/webhook-endpoints`, json, { url });
      if (r.status !== 201) throw new Error(`endpoint: ${r.status} ${r.body}`);
      return (JSON.parse(r.body as string) as { data: SeededEndpoint }).data;
    };
    ctx.endpoints ??= [
      await makeEndpoint(`${ctx.origin}/hist/a`),
      await makeEndpoint(`${ctx.origin}/hist/b`),
    ];
    const [main] = ctx.endpoints;
    const cookie = await signIn(base, KEY);

    const run = await createSessionsAtRate({
      bases: [base],
      apiKey: KEY,
      rate: RATE,
      seconds: LATENCY_SECONDS,
      warmupSeconds: 5,
      body: (n) => ({ ...sessionRequest, reference: `hist-${name}-${n}-${randomUUID().slice(0, 8)}` }),
    });
    const latency = { ...(await latencyOf(run.created, ctx.arrived)), errors: run.errors };
    const failed: Record<string, number> = { ...run.errorsByAnswer };
    if (latency.missing > 0) failed.missing = latency.missing;
    calls.latency = {
      medianMs: round(latency.latencyMs.p99),
      maxMs: round(latency.latencyMs.max),
      runs: latency.sessions,
      failed,
    };
    log(`${name}: latency p99 ${latency.latencyMs.p99.toFixed(1)} ms, ${run.errors} errors`);
    await drain(ctx.client);

    const get =
      (path: string, headers: Record<string, string> = auth) =>
      () =>
        call('GET', base + path, headers);
    calls.eventsFirst = await timed(get('/events'));
    let after = '';
    let depth = 0;
    while (depth < 1000) {
      const r = await call('GET', `${base}/events?limit=100${after ? `&after=${after}` : ''}`, auth);
      if (r.status !== 200) throw new Error(`paging the events: ${r.status} ${r.body?.slice(0, 200)}`);
      const page = JSON.parse(r.body as string) as { data: unknown[]; pagination: { after: string } };
      depth += page.data.length;
      if (!page.pagination.after) break;
      after = page.pagination.after;
    }
    calls.eventsDeep = await timed(get(`/events?after=${after}`));
    const { rows } = await ctx.client.query<{ newest: string; oldest: string }>(
      `select (select id from payments where business_id = $1 order by created_at desc, id desc limit 1) as newest,
              (select id from payments where business_id = $1 order by created_at, id limit 1) as oldest`,
      [BUSINESS],
    );
    calls.paymentNewest = await timed(get(`/events?payment_id=${rows[0]?.newest}`));
    calls.paymentOldest = await timed(get(`/events?payment_id=${rows[0]?.oldest}`));
    for (const status of ['failed', 'pending', 'none'] as const)
      calls[`status_${status}`] = await timed(get(`/events?delivery_status=${status}`));
    calls.dashboardEndpoint = await timed(get(`/dashboard/endpoints/${main.id}`, { cookie }));
    calls.dashboardEndpoints = await timed(get('/dashboard/endpoints', { cookie }));
    calls.metrics = await timed(get('/metrics', {}));
    log(`${name}: reads done`);

    const deletes: Sample[] = [];
    for (let i = 0; i < REPEAT; i++) {
      const endpoint = await makeEndpoint(`${ctx.origin}/hist/removed-${name}-${i}`);
      await seedPending(ctx.client, endpoint, BUSINESS, PENDING);
      deletes.push(await call('DELETE', `${base}/webhook-endpoints/${endpoint.id}`, auth));
    }
    calls.delete = summary(deletes, 200);

    const recovers: Sample[] = [];
    const queued: (number | null)[] = [];
    for (let i = 0; i < REPEAT; i++) {
      const since = new Date(Date.now() - 13 * 86_400_000).toISOString();
      const headers = { ...json, 'idempotency-key': randomUUID() };
      const r = await call('POST', `${base}/webhook-endpoints/${main.id}/recover`, headers, { since });
      recovers.push(r);
      queued.push(
        r.status === 202 ? (JSON.parse(r.body as string) as { data: { queued: number } }).data.queued : null,
      );
      await drain(ctx.client);
    }
    calls.recover = summary(recovers, 202);

    const down = await makeEndpoint(`${ctx.origin}/hist/down-${name}`);
    const backlog = await seedPending(ctx.client, down, BUSINESS, BACKLOG);
    calls.pendingBacklog = await timed(
      get('/events?delivery_status=pending', { authorization: `Bearer ${SMALL_KEY}` }),
    );
    log(`${name}: done; recoveries queued ${queued.join(', ')}; a backlog of ${backlog}`);
    load.push(loadavg()[0] as number);
    return { calls, latency, recovered: queued, eventsDeep: depth, load };
  } finally {
    if (serve) await stopServe(serve);
  }
}

/** Waits (30 s at most) until no delivery is due: what a call set off is delivered before the next. */
async function drain(client: pg.Client) {
  const deadline = now() + 30_000;
  while (now() < deadline) {
    const { rows } = await client.query<{ n: number }>(
      `select count(*)::int as n from deliveries where status = 'pending' and next_attempt_at <= now()`,
    );
    if ((rows[0]?.n ?? 0) === 0) return;
    await sleep(100);
  }
}

/** The rows of the table, in its order: key in the results, and what the row says. */
const ROWS: [key: string, call: string][] = [
  ['start', 'start to /healthz 200'],
  ['latency', `latency 201 to receiver at ${RATE}/s, p99`],
  ['eventsFirst', 'GET /events, first page'],
  ['eventsDeep', 'GET /events, 1,000 deep'],
  ['paymentNewest', 'GET /events?payment_id=, newest payment'],
  ['paymentOldest', 'GET /events?payment_id=, oldest payment'],
  ['status_failed', 'GET /events?delivery_status=failed'],
  ['status_pending', 'GET /events?delivery_status=pending'],
  ['status_none', 'GET /events?delivery_status=none'],
  ['dashboardEndpoint', 'GET /dashboard/endpoints/:id (charts)'],
  ['dashboardEndpoints', 'GET /dashboard/endpoints (24 h health)'],
  ['recover', 'POST /webhook-endpoints/{id}/recover since 13 days'],
  ['delete', `DELETE an endpoint with ${PENDING} pending deliveries`],
  ['metrics', 'GET /metrics'],
  [
    'pendingBacklog',
    `GET /events?delivery_status=pending of a small business, another's ${BACKLOG} pending deliveries`,
  ],
];

async function main() {
  const server = new pg.Client({ connectionString: BENCH_DATABASE_URL });
  await server.connect();
  const dir = await mkdtemp(join(tmpdir(), 'payhook-bench-history-'));
  const arrived = new Map<string, number>();
  const receiver = await startReceiver(arrived);
  const drops: (() => Promise<unknown>)[] = [];
  const clients: pg.Client[] = [];
  const connect = async (url: string) => {
    const client = new pg.Client({ connectionString: url });
    clients.push(client);
    await client.connect();
    return client;
  };
  try {
    const first = await makeDatabase(server, `payhook_bench_history_${process.pid}_empty`);
    drops.push(first.drop);
    // The sender's own migrations make the schema, as its first start would.
    await (await openDatabase({ url: first.url })).close();
    const base = { dir, origin: receiver.origin, arrived };
    const empty = await side('empty', { ...base, databaseUrl: first.url, client: await connect(first.url) });

    const second = await makeDatabase(server, `payhook_bench_history_${process.pid}_seeded`);
    drops.push(second.drop);
    await migrateToFirstRelease(second.url);
    const client = await connect(second.url);
    log(`seeding ${EVENTS.toLocaleString('en-US')} events...`);
    const plan = { events: EVENTS, businesses: BUSINESSES, days: DAYS, bigBusiness: BUSINESS };
    const seeded = await seedHistory(client, { ...plan, origin: receiver.origin }, log);
    log(`VACUUM ANALYZE took ${seeded.vacuumAnalyzeSeconds.toFixed(0)} s; the sender's later migrations...`);
    const t = now();
    await (await openDatabase({ url: second.url })).close();
    await client.query('analyze');
    const upgradeSeconds = (now() - t) / 1000;
    log(`upgraded in ${upgradeSeconds.toFixed(0)} s`);
    const history = await side('history', {
      ...base,
      databaseUrl: second.url,
      client,
      endpoints: seeded.endpoints,
    });
    const calls = ROWS.map(([key, name]) => {
      const e = empty.calls[key] as Summary;
      const h = history.calls[key] as Summary;
      return { call: name, empty: e, history: h, ratio: h.medianMs / e.medianMs };
    });
    const cell = (s: Summary) => `${s.medianMs.toFixed(1)} (max ${s.maxMs.toFixed(1)})`;
    const failures = (s: Summary) =>
      Object.entries(s.failed)
        .map(([status, n]) => `${status} x${n}`)
        .join(', ');
    console.log(
      `\n${seeded.rows.events.toLocaleString('en-US')} events, ${seeded.rows.deliveries.toLocaleString('en-US')} deliveries, ${seeded.rows.attempts.toLocaleString('en-US')} attempts; seeded in ${seeded.seedSeconds.toFixed(0)} s, VACUUM ANALYZE ${seeded.vacuumAnalyzeSeconds.toFixed(0)} s, upgrade ${upgradeSeconds.toFixed(0)} s. ms, median (max) of ${REPEAT}:\n`,
    );
    printTable(
      ['call', 'empty', 'with history', 'ratio', 'failed: empty / history'],
      calls.map((c) => [
        c.call,
        cell(c.empty),
        cell(c.history),
        `${c.ratio.toFixed(2)}x`,
        `${failures(c.empty) || '-'} / ${failures(c.history) || '-'}`,
      ]),
    );
    const file = writeResults('history', {
      events: EVENTS,
      businesses: BUSINESSES,
      days: DAYS,
      repeat: REPEAT,
      starts: STARTS,
      rate: RATE,
      latencySeconds: LATENCY_SECONDS,
      pendingPerDelete: PENDING,
      seeded: { ...seeded, endpoints: undefined, upgradeSeconds },
      calls,
      latency: { empty: empty.latency, history: history.latency },
      recovered: { empty: empty.recovered, history: history.recovered },
      eventsDeep: { empty: empty.eventsDeep, history: history.eventsDeep },
      machine: { cores: availableParallelism(), load: { empty: empty.load, history: history.load } },
      serverLog: { empty: readLogs(dir, 'empty'), history: readLogs(dir, 'history') },
    });
    console.log(`\nresults: ${file}`);
  } finally {
    receiver.server.closeAllConnections();
    receiver.server.close();
    for (const client of clients) await client.end().catch(() => {});
    for (const drop of drops) await drop();
    await server.end();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
