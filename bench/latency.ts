/**
 * pnpm bench:latency — from the API's 201 to the receiver's door: how long a
 * `payment.session.created` event takes to arrive while sessions are created at a steady rate, on
 * the sender's two storages (PGlite, the default of `payhook serve`, and PostgreSQL), at
 * BENCH_LATENCY_RATES creations a second (default 50,100,200) for BENCH_LATENCY_SECONDS each
 * (default 20, after 3 s of warm-up at the same rate); BENCH_LATENCY_STORAGES picks the storages
 * (default pglite,postgres).
 *
 * Method: `payhook serve` (the built CLI, as a user runs it, with its readable log lines on a
 * pipe this process drains) in a child process, on a fresh PGlite directory or a fresh PostgreSQL
 * database (TEST_DATABASE_URL's server; dropped afterwards). This process is the client and the
 * receiver: it starts one `POST /payment-sessions` every 1/rate seconds whatever the answers
 * (open loop, fetch's keep-alive connections), notes when each 201 arrives, and its node:http receiver on
 * 127.0.0.1 notes when each event arrives. The latency of a session is arrival - 201 (one clock).
 * Also: the API's own answer time, and the p50 of the first and the last third of the run, whose
 * ratio says whether the latency grows during a run (a sender that falls behind).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { sessionRequest } from '../packages/sender/test/fixtures/requests.js';
import { BENCH_DATABASE_URL, printTable, writeResults } from './lib.js';

const RATES = (process.env.BENCH_LATENCY_RATES ?? '50,100,200').split(',').map(Number);
const SECONDS = Number(process.env.BENCH_LATENCY_SECONDS ?? 20);
const WARMUP_SECONDS = 3;
const KEY = 'sk_test_bench_latency';
const BUSINESS = 'biz-bench-latency';
const cli = fileURLToPath(new URL('../packages/cli/dist/cli.js', import.meta.url));

const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
}

interface RunResult {
  rate: number;
  sessions: number;
  /** Sessions whose event had not arrived 10 s after the last creation. */
  missing: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number };
  apiMs: { p50: number; p99: number };
  /** p50 of the last third of the run over the p50 of the first third. */
  growth: number;
  /** Answers other than 201. */
  errors: number;
}

/** The receiver: notes when each session's created event arrives. */
async function startReceiver(arrived: Map<string, number>) {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = now();
      res.writeHead(200).end();
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        event: string;
        data: { id: string };
      };
      if (body.event === 'payment.session.created' && !arrived.has(body.data.id))
        arrived.set(body.data.id, at);
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks/` };
}

/** `payhook serve` on `storage`, resolved once it listens. */
async function startServe(args: string[]): Promise<{ child: ChildProcess; base: string }> {
  const child = spawn(process.execPath, [cli, 'serve', '--port', '0', '--allow-private-webhooks', ...args], {
    env: { ...process.env, PAYHOOK_API_KEYS: `${KEY}:${BUSINESS}:test`, DATABASE_URL: '', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const base = await new Promise<string>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      if (out.length < 100_000) out += chunk;
      const match = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (match?.[1]) resolve(match[1]);
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      out += chunk;
    });
    child.once('exit', (code) => reject(new Error(`payhook serve exited (${code}):\n${out}`)));
  });
  return { child, base };
}

async function measure(base: string, receiverUrl: string, arrived: Map<string, number>, rate: number) {
  const headers = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
  const settings = await fetch(`${base}/accounts/settings`, {
    method: 'PATCH',
    headers,
    body: JSON.stringify({ require_mfa: false, webhook_urls: [receiverUrl] }),
  });
  if (settings.status !== 200) throw new Error(`settings: ${settings.status} ${await settings.text()}`);
  const created: { id: string; at: number; apiMs: number; measured: boolean }[] = [];
  let errors = 0;
  let n = 0;
  const create = async (measured: boolean) => {
    const started = now();
    const res = await fetch(`${base}/payment-sessions`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        ...sessionRequest,
        reference: `bench-${rate}-${n++}-${randomBytes(4).toString('hex')}`,
      }),
    });
    const text = await res.text();
    const at = now();
    if (res.status !== 201) {
      errors++;
      return;
    }
    const id = (JSON.parse(text) as { data: { payment: { id: string } } }).data.payment.id;
    created.push({ id, at, apiMs: at - started, measured });
  };
  const inFlight = new Set<Promise<void>>();
  const total = (WARMUP_SECONDS + SECONDS) * rate;
  const start = now();
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / rate;
    const wait = due - now();
    if (wait > 1) await sleep(wait);
    const p = create(i >= WARMUP_SECONDS * rate).catch(() => {
      errors++;
    });
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p));
  }
  await Promise.all(inFlight);
  const deadline = now() + 10_000;
  while (now() < deadline && created.some((c) => !arrived.has(c.id))) await sleep(20);

  const measured = created.filter((c) => c.measured);
  const latencies = measured
    .filter((c) => arrived.has(c.id))
    .map((c) => (arrived.get(c.id) as number) - c.at);
  const sorted = [...latencies].sort((a, b) => a - b);
  const api = measured.map((c) => c.apiMs).sort((a, b) => a - b);
  const third = Math.floor(latencies.length / 3);
  const p50Of = (xs: number[]) =>
    quantile(
      [...xs].sort((a, b) => a - b),
      0.5,
    );
  const result: RunResult = {
    rate,
    sessions: measured.length,
    missing: measured.length - latencies.length,
    latencyMs: {
      p50: quantile(sorted, 0.5),
      p90: quantile(sorted, 0.9),
      p99: quantile(sorted, 0.99),
      max: sorted.at(-1) ?? Number.NaN,
    },
    apiMs: { p50: quantile(api, 0.5), p99: quantile(api, 0.99) },
    growth: p50Of(latencies.slice(-third)) / p50Of(latencies.slice(0, third)),
    errors,
  };
  return result;
}

async function onStorage(storage: 'pglite' | 'postgres'): Promise<RunResult[]> {
  const results: RunResult[] = [];
  for (const rate of RATES) {
    const arrived = new Map<string, number>();
    const receiver = await startReceiver(arrived);
    const dir = await mkdtemp(join(tmpdir(), 'payhook-bench-latency-'));
    const database = `payhook_bench_latency_${randomBytes(4).toString('hex')}`;
    const admin = new pg.Client({ connectionString: BENCH_DATABASE_URL });
    let serve: { child: ChildProcess; base: string } | undefined;
    try {
      let args: string[];
      if (storage === 'postgres') {
        await admin.connect();
        await admin.query(`create database ${database}`);
        const url = new URL(BENCH_DATABASE_URL);
        url.pathname = `/${database}`;
        args = ['--database-url', url.toString()];
      } else {
        args = ['--data-dir', join(dir, 'data')];
      }
      serve = await startServe(args);
      const result = await measure(serve.base, receiver.url, arrived, rate);
      results.push(result);
      console.error(
        `${storage} ${rate}/s: p50 ${result.latencyMs.p50.toFixed(1)} ms, p99 ${result.latencyMs.p99.toFixed(1)} ms`,
      );
    } finally {
      if (serve) {
        serve.child.kill('SIGTERM');
        await once(serve.child, 'exit');
      }
      receiver.server.closeAllConnections();
      receiver.server.close();
      await rm(dir, { recursive: true, force: true });
      if (storage === 'postgres') {
        await admin.query(`drop database if exists ${database} with (force)`);
        await admin.end();
      }
    }
  }
  return results;
}

const STORAGES = (process.env.BENCH_LATENCY_STORAGES ?? 'pglite,postgres').split(',') as (
  | 'pglite'
  | 'postgres'
)[];
const results: Record<string, RunResult[]> = {};
for (const storage of STORAGES) results[storage] = await onStorage(storage);
const ms = (x: number) => (Number.isNaN(x) ? '-' : x >= 100 ? x.toFixed(0) : x.toFixed(1));
printTable(
  ['storage', 'rate/s', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'growth', 'API p99 ms', 'missing', 'errors'],
  STORAGES.flatMap((storage) =>
    (results[storage] ?? []).map((r) => [
      storage,
      String(r.rate),
      ms(r.latencyMs.p50),
      ms(r.latencyMs.p90),
      ms(r.latencyMs.p99),
      ms(r.latencyMs.max),
      `${r.growth.toFixed(2)}x`,
      ms(r.apiMs.p99),
      String(r.missing),
      String(r.errors),
    ]),
  ),
);
console.log(`\nwritten to ${writeResults('latency', { seconds: SECONDS, ...results })}`);
