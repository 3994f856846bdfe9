/**
 * pnpm bench:slow-endpoints — a slow or dead endpoint harms no one else: the latency from the API's
 * 201 to the receiver's door for four healthy URLs, alone and beside two bad ones that each have
 * BENCH_SLOW_BACKLOG (default 10,000) deliveries due: one that accepts connections and never
 * answers, one that answers after 5 s. Target: the healthy URLs' p99 within 2x of the run without
 * the bad ones.
 *
 * Method: the sender as `main.ts` starts it (`startSender`: API, worker at its defaults, 32
 * attempts in flight and 4 per URL) in this process, on PostgreSQL (a fresh schema on
 * TEST_DATABASE_URL's server) and on PGlite (a fresh directory), with private addresses allowed.
 * The receivers are node:http servers on 127.0.0.1 in a child process (the hanging one holds each
 * request until the run ends; the sender gives up on it after its 15 s total timeout). The bad
 * URLs' deliveries are inserted straight into the outbox, due at once, before the run. Then
 * BENCH_SLOW_RATE sessions a second (default 50) for BENCH_SLOW_SECONDS (default 20, after 3 s of
 * warm-up) are created through the API for a business whose four URLs are the healthy ones: each
 * session's `payment.session.created` goes to each of them, and its latency is its arrival at the
 * receiver (the child notes the time, this process compares it with the 201's; one machine, one
 * clock). BENCH_SLOW_STORAGES picks the storages (default postgres,pglite). On PGlite a third run
 * repeats the second with the database's maintenance off (PAYHOOK_MAINTENANCE_INTERVAL_SECONDS=0):
 * PGlite runs every statement on one thread, so its VACUUM and ANALYZE of the new backlog hold
 * every statement behind them.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Database, loadConfig, openDatabase, startSender } from '@payhook/sender';
import pg from 'pg';
import { sessionRequest } from '../packages/sender/test/fixtures/requests.js';
import { queueDeliveries } from './delivery-fixtures.js';
import { BENCH_DATABASE_URL, printTable, writeResults } from './lib.js';

const BACKLOG = Number(process.env.BENCH_SLOW_BACKLOG ?? 10_000);
const RATE = Number(process.env.BENCH_SLOW_RATE ?? 50);
const SECONDS = Number(process.env.BENCH_SLOW_SECONDS ?? 20);
const WARMUP_SECONDS = 3;
const HEALTHY = 4;
const KEY = 'sk_test_bench_slow_endpoints';
const BUSINESS = 'biz-bench-slow-endpoints';

const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const SCENARIOS = ['alone', 'beside', 'beside, no maintenance'] as const;

interface Run {
  deliveries: number;
  missing: number;
  p50: number;
  p90: number;
  p99: number;
  /** Attempts made to the bad URLs during the run. */
  badAttempts?: number;
}

const quantile = (sorted: number[], q: number) =>
  sorted.length === 0
    ? Number.NaN
    : (sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number);

async function run(database: Database, withBad: boolean, maintenance = true): Promise<Run> {
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), ['slow-endpoint-receivers'], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const arrivals = new Map<string, number>();
  const { ports } = (await once(child, 'message'))[0] as {
    ports: { healthy: number; hanging: number; slow: number };
  };
  child.on('message', (m: { id: string; path: string; at: number }) =>
    arrivals.set(`${m.id} ${m.path}`, m.at),
  );
  const healthyUrls = Array.from(
    { length: HEALTHY },
    (_, i) => `http://127.0.0.1:${ports.healthy}/webhooks/${i}/`,
  );
  const bad = [`http://127.0.0.1:${ports.hanging}/webhooks/`, `http://127.0.0.1:${ports.slow}/webhooks/`];
  if (withBad) for (const url of bad) await queueDeliveries(database, [url], BACKLOG);
  const sender = await startSender({
    database,
    logger: false,
    config: loadConfig({
      PORT: '0',
      PAYHOOK_API_KEYS: `${KEY}:${BUSINESS}:test`,
      PAYHOOK_ALLOW_PRIVATE_WEBHOOKS: '1',
      PAYHOOK_SHUTDOWN_GRACE_SECONDS: '0',
      ...(maintenance ? {} : { PAYHOOK_MAINTENANCE_INTERVAL_SECONDS: '0' }),
      LOG_LEVEL: 'silent',
    }),
  });
  const headers = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
  try {
    const settings = await fetch(`${sender.url}/accounts/settings`, {
      method: 'PATCH',
      headers,
      body: JSON.stringify({ require_mfa: false, webhook_urls: healthyUrls }),
    });
    if (settings.status !== 200) throw new Error(`settings: ${settings.status} ${await settings.text()}`);
    const created: { id: string; at: number; measured: boolean }[] = [];
    const inFlight: Promise<void>[] = [];
    const start = now();
    const total = (WARMUP_SECONDS + SECONDS) * RATE;
    for (let i = 0; i < total; i++) {
      const wait = start + (i * 1000) / RATE - now();
      if (wait > 1) await sleep(wait);
      inFlight.push(
        (async () => {
          const res = await fetch(`${sender.url}/payment-sessions`, {
            method: 'POST',
            headers,
            body: JSON.stringify({
              ...sessionRequest,
              reference: `slow-${i}-${randomBytes(4).toString('hex')}`,
            }),
          });
          const body = (await res.json()) as { data?: { payment: { id: string } } };
          if (body.data)
            created.push({ id: body.data.payment.id, at: now(), measured: i >= WARMUP_SECONDS * RATE });
        })(),
      );
    }
    await Promise.all(inFlight);
    const keys = (c: { id: string }) => healthyUrls.map((u) => `${c.id} ${new URL(u).pathname}`);
    const deadline = now() + 30_000;
    while (now() < deadline && created.some((c) => keys(c).some((k) => !arrivals.has(k)))) await sleep(50);
    const latencies: number[] = [];
    let missing = 0;
    for (const c of created.filter((x) => x.measured)) {
      for (const key of keys(c)) {
        const at = arrivals.get(key);
        if (at === undefined) missing++;
        else latencies.push(at - c.at);
      }
    }
    latencies.sort((a, b) => a - b);
    const result: Run = {
      deliveries: latencies.length,
      missing,
      p50: quantile(latencies, 0.5),
      p90: quantile(latencies, 0.9),
      p99: quantile(latencies, 0.99),
    };
    if (withBad) {
      const { count } = await database.db
        .selectFrom('delivery_attempts')
        .innerJoin('deliveries', 'deliveries.id', 'delivery_attempts.delivery_id')
        .where('deliveries.url', 'in', bad)
        .select((eb) => eb.fn.countAll<string>().as('count'))
        .executeTakeFirstOrThrow();
      result.badAttempts = Number(count);
    }
    return result;
  } finally {
    child.disconnect();
    child.kill();
    await sender.close();
  }
}

async function onStorage(storage: 'postgres' | 'pglite') {
  const results: Record<string, Run> = {};
  // On PGlite, once more without its maintenance: what the backlog's VACUUM and ANALYZE cost the
  // healthy URLs, apart from what the bad endpoints do.
  const scenarios = storage === 'pglite' ? SCENARIOS : SCENARIOS.slice(0, 2);
  for (const scenario of scenarios) {
    const schema = `payhook_bench_${randomBytes(4).toString('hex')}`;
    const dir = await mkdtemp(join(tmpdir(), 'payhook-bench-slow-'));
    const database =
      storage === 'postgres'
        ? await openDatabase({ url: BENCH_DATABASE_URL, schema })
        : await openDatabase({ dataDir: join(dir, 'data') });
    try {
      results[scenario] = await run(database, scenario !== 'alone', scenario !== 'beside, no maintenance');
      console.error(`${storage} ${scenario}: p99 ${results[scenario]?.p99.toFixed(1)} ms`);
    } finally {
      await database.close();
      await rm(dir, { recursive: true, force: true });
      if (storage === 'postgres') {
        const client = new pg.Client({ connectionString: BENCH_DATABASE_URL });
        await client.connect();
        await client.query(`drop schema if exists ${schema} cascade`);
        await client.end();
      }
    }
  }
  return results;
}

async function main() {
  const storages = (process.env.BENCH_SLOW_STORAGES ?? 'postgres,pglite').split(',') as (
    | 'postgres'
    | 'pglite'
  )[];
  const results: Partial<Record<'postgres' | 'pglite', Record<string, Run>>> = {};
  for (const storage of storages) results[storage] = await onStorage(storage);
  const ms = (x: number | undefined) => (x === undefined || Number.isNaN(x) ? '-' : x.toFixed(1));
  printTable(
    [
      'storage',
      'bad URLs',
      'deliveries',
      'p50 ms',
      'p90 ms',
      'p99 ms',
      'p99 x alone',
      'missing',
      'bad attempts',
    ],
    storages.flatMap((storage) =>
      SCENARIOS.filter((scenario) => results[storage]?.[scenario]).map((scenario) => {
        const r = results[storage]?.[scenario] as Run;
        const alone = results[storage]?.alone as Run;
        return [
          storage,
          scenario === 'alone'
            ? 'none'
            : `hang + 5 s, ${BACKLOG} each${scenario === 'beside' ? '' : ', maintenance off'}`,
          String(r.deliveries),
          ms(r.p50),
          ms(r.p90),
          ms(r.p99),
          `${(r.p99 / alone.p99).toFixed(2)}x`,
          String(r.missing),
          r.badAttempts === undefined ? '-' : String(r.badAttempts),
        ];
      }),
    ),
  );
  console.log(
    `\nwritten to ${writeResults('slow-endpoints', { backlog: BACKLOG, rate: RATE, seconds: SECONDS, healthyUrls: HEALTHY, ...results })}`,
  );
}

// The child: three receivers, arrivals reported as JSON lines { id, path, at }.
async function receivers(): Promise<void> {
  const held: ServerResponse[] = [];
  const serve = (answer: (req: IncomingMessage, res: ServerResponse, body: string) => void) => {
    const server = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => {
        body += chunk;
      });
      req.on('end', () => answer(req, res, body));
    });
    server.keepAliveTimeout = 60_000;
    return server.listen(0, '127.0.0.1');
  };
  const healthy = serve((req, res, body) => {
    const at = now();
    res.writeHead(200).end();
    const event = JSON.parse(body) as { event: string; data: { id: string } };
    if (event.event === 'payment.session.created') process.send?.({ id: event.data.id, path: req.url, at });
  });
  const hanging = serve((_req, res) => void held.push(res));
  const slow = serve((_req, res) => void setTimeout(() => res.writeHead(200).end(), 5000));
  await Promise.all([healthy, hanging, slow].map((s) => once(s, 'listening')));
  const port = (s: typeof healthy) => (s.address() as AddressInfo).port;
  process.send?.({ ports: { healthy: port(healthy), hanging: port(hanging), slow: port(slow) } });
  process.on('disconnect', () => process.exit(0));
}

if (process.argv[2] === 'slow-endpoint-receivers') await receivers();
else await main();
