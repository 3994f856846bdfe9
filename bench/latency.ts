/**
 * pnpm bench:latency — from the API's 201 to the receiver's door: how long a
 * `payment.session.created` event takes to arrive while sessions are created at a steady rate, on
 * the sender's two storages (PGlite, the default of `payhook serve`, and PostgreSQL), at
 * BENCH_LATENCY_RATES creations a second (default 50,100,200) for BENCH_LATENCY_SECONDS each
 * (default 20, after 6 s of warm-up, the rate rising from 0); BENCH_LATENCY_STORAGES picks the storages
 * (default pglite,postgres), and BENCH_LATENCY_INSTANCES how many `payhook serve` processes share
 * the PostgreSQL database (default 1; `1,2` runs both).
 *
 * With several instances, the client sends each creation to the next one in turn (a load balancer's
 * round robin) and one receiver takes every delivery: how the sender goes on past one process, on
 * one machine or several, one PostgreSQL between them. Also reported: the sessions acknowledged a
 * second, the sender processes' CPU (of one core) over the run, and on PostgreSQL what its active
 * backends were waiting on (`pg_stat_activity`, sampled every 250 ms: `CPU` is no wait).
 *
 * Method: `payhook serve` (the built CLI, as a user runs it, its log lines written to a file) in a
 * child process, on a fresh PGlite directory or a fresh PostgreSQL database (TEST_DATABASE_URL's
 * server; dropped afterwards). This process is the client and the receiver: it starts one `POST
 * /payment-sessions` every 1/rate seconds whatever the answers (open loop, fetch's keep-alive
 * connections; an answer not in within 30 s counts as an error), notes when each 201 arrives, and
 * its node:http receiver on 127.0.0.1 notes when each event arrives. BENCH_LATENCY_TIMELINE=1
 * prints each second's sessions and latency, and the errors by kind. The latency of a session is arrival - 201 (one clock).
 * Also: the API's own answer time, and the p50 of the first and the last third of the run, whose
 * ratio says whether the latency grows during a run (a sender that falls behind).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { closeSync, openSync, readFileSync } from 'node:fs';
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
const INSTANCES = (process.env.BENCH_LATENCY_INSTANCES ?? '1').split(',').map(Number);
const SECONDS = Number(process.env.BENCH_LATENCY_SECONDS ?? 20);
/** The warm-up: the rate rises from 0 to the run's over this long, as a provider's peak comes. */
const WARMUP_SECONDS = 6;
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
  /** Sessions acknowledged a second over the run. */
  acknowledgedPerSecond: number;
  /** The sender processes' CPU time over the run's wall time, in % of one core. */
  senderCpuPercent: number;
  /** PostgreSQL: the share of active backends' samples per wait event, the largest first. */
  waits?: Record<string, number>;
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

/**
 * `payhook serve` with `args`, resolved once it listens. Its output goes to a file, as a
 * provider's log collector would take it: read through a pipe by this process, busy as the client,
 * the pipe filled and each of the sender's writes (a line per request and per attempt) waited for
 * this process to read, which stalled the sender, not the measure of it.
 */
async function startServe(args: string[], logFile: string): Promise<{ child: ChildProcess; base: string }> {
  const out = openSync(logFile, 'w');
  const child = spawn(process.execPath, [cli, 'serve', '--port', '0', '--allow-private-webhooks', ...args], {
    env: { ...process.env, PAYHOOK_API_KEYS: `${KEY}:${BUSINESS}:test`, DATABASE_URL: '', LOG_LEVEL: 'info' },
    stdio: ['ignore', out, out],
  });
  closeSync(out);
  let exited: number | null | undefined;
  child.once('exit', (code) => {
    exited = code;
  });
  for (;;) {
    const text = readFileSync(logFile, 'utf8');
    const match = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(text);
    if (match?.[1]) return { child, base: match[1] };
    if (exited !== undefined) throw new Error(`payhook serve exited (${exited}):\n${text}`);
    await sleep(50);
  }
}

/** CPU time (user and system) of process `pid` so far, in ms (Linux: /proc). */
function cpuMs(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
  } catch {
    return 0;
  }
}

/** Samples what `database`'s active backends wait on, every 250 ms, until stopped. */
function sampleWaits(database: string | undefined) {
  const counts = new Map<string, number>();
  if (database === undefined) return { stop: async () => undefined };
  const client = new pg.Client({ connectionString: BENCH_DATABASE_URL });
  let running = true;
  const done = (async () => {
    await client.connect();
    while (running) {
      const { rows } = await client.query<{ w: string; n: number }>(
        `select coalesce(wait_event_type || ':' || wait_event, 'CPU') as w, count(*)::int as n
         from pg_stat_activity where datname = $1 and state = 'active' and pid <> pg_backend_pid() group by 1`,
        [database],
      );
      for (const { w, n } of rows) counts.set(w, (counts.get(w) ?? 0) + n);
      await sleep(250);
    }
    await client.end();
  })();
  return {
    async stop(): Promise<Record<string, number>> {
      running = false;
      await done;
      const total = [...counts.values()].reduce((a, b) => a + b, 0);
      return Object.fromEntries(
        [...counts].sort((a, b) => b[1] - a[1]).map(([w, n]) => [w, Math.round((1000 * n) / total) / 1000]),
      );
    },
  };
}

async function measure(
  bases: string[],
  receiverUrl: string,
  arrived: Map<string, number>,
  rate: number,
  watch: { pids: (number | undefined)[]; database?: string },
) {
  const headers = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
  const base = bases[0] as string;
  const settings = await fetch(`${base}/accounts/settings`, {
    method: 'PATCH',
    headers,
    body: JSON.stringify({ require_mfa: false, webhook_urls: [receiverUrl] }),
  });
  if (settings.status !== 200) throw new Error(`settings: ${settings.status} ${await settings.text()}`);
  const created: { id: string; at: number; apiMs: number; measured: boolean }[] = [];
  let errors = 0;
  const errorKinds = new Map<string, number>();
  const countError = (kind: string) => errorKinds.set(kind, (errorKinds.get(kind) ?? 0) + 1);
  let n = 0;
  const create = async (measured: boolean) => {
    const started = now();
    const res = await fetch(`${bases[n % bases.length]}/payment-sessions`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        ...sessionRequest,
        reference: `bench-${rate}-${n++}-${randomBytes(4).toString('hex')}`,
      }),
      // A sender far behind answers late or never: past this, the creation counts as an error.
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    const at = now();
    if (res.status !== 201) {
      errors++;
      countError(`${res.status} ${text.slice(0, 80)}`);
      return;
    }
    const id = (JSON.parse(text) as { data: { payment: { id: string } } }).data.payment.id;
    created.push({ id, at, apiMs: at - started, measured });
  };
  const inFlight = new Set<Promise<void>>();
  // Warm-up sessions, the rate rising from 0: the k-th at sqrt(2 W k / rate) seconds.
  const warmup = Math.floor((rate * WARMUP_SECONDS) / 2);
  const total = warmup + SECONDS * rate;
  const dueOf = (i: number) =>
    i < warmup
      ? 1000 * Math.sqrt((2 * WARMUP_SECONDS * i) / rate)
      : 1000 * WARMUP_SECONDS + ((i - warmup) * 1000) / rate;
  const start = now();
  let cpuBefore = 0;
  let waits: ReturnType<typeof sampleWaits> | undefined;
  let measuredFrom = start;
  for (let i = 0; i < total; i++) {
    const due = start + dueOf(i);
    const wait = due - now();
    if (wait > 1) await sleep(wait);
    if (i === warmup) {
      measuredFrom = now();
      cpuBefore = watch.pids.reduce((sum: number, pid) => sum + cpuMs(pid), 0);
      waits = sampleWaits(watch.database);
    }
    const p = create(i >= warmup).catch((e: unknown) => {
      errors++;
      countError(String((e as { cause?: unknown }).cause ?? e).slice(0, 80));
    });
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p));
  }
  await Promise.all(inFlight);
  const runMs = now() - measuredFrom;
  const cpu = watch.pids.reduce((sum: number, pid) => sum + cpuMs(pid), 0) - cpuBefore;
  const waited = await waits?.stop();
  const deadline = now() + 10_000;
  while (now() < deadline && created.some((c) => !arrived.has(c.id))) await sleep(20);

  if (process.env.BENCH_LATENCY_TIMELINE === '1') {
    // Per second of the run: sessions answered 201, their latency's p50 and p99, and errors.
    const bySecond = new Map<number, number[]>();
    for (const c of created) {
      const second = Math.floor((c.at - start) / 1000);
      const list = bySecond.get(second) ?? [];
      list.push((arrived.get(c.id) ?? Number.POSITIVE_INFINITY) - c.at);
      bySecond.set(second, list);
    }
    for (const [second, list] of [...bySecond].sort((a, b) => a[0] - b[0])) {
      list.sort((a, b) => a - b);
      console.error(
        `  ${second}s: ${list.length} created, p50 ${quantile(list, 0.5).toFixed(1)} ms, p99 ${quantile(list, 0.99).toFixed(1)} ms`,
      );
    }
    for (const [kind, n] of errorKinds) console.error(`  errors: ${n} ${kind}`);
  }
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
    acknowledgedPerSecond: (measured.length * 1000) / runMs,
    senderCpuPercent: (100 * cpu) / runMs,
    ...(waited ? { waits: waited } : {}),
  };
  return result;
}

async function onStorage(storage: 'pglite' | 'postgres', instances = 1): Promise<RunResult[]> {
  const results: RunResult[] = [];
  for (const rate of RATES) {
    const arrived = new Map<string, number>();
    const receiver = await startReceiver(arrived);
    const dir = await mkdtemp(join(tmpdir(), 'payhook-bench-latency-'));
    const database = `payhook_bench_latency_${randomBytes(4).toString('hex')}`;
    const admin = new pg.Client({ connectionString: BENCH_DATABASE_URL });
    const serves: { child: ChildProcess; base: string }[] = [];
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
      // One after the other: the first makes the schema, the others find it made.
      for (let k = 0; k < instances; k++) serves.push(await startServe(args, join(dir, `serve-${k}.log`)));
      const result = await measure(
        serves.map((s) => s.base),
        receiver.url,
        arrived,
        rate,
        { pids: serves.map((s) => s.child.pid), ...(storage === 'postgres' ? { database } : {}) },
      );
      results.push(result);
      console.error(
        `${storage} x${instances} ${rate}/s: p50 ${result.latencyMs.p50.toFixed(1)} ms, p99 ${result.latencyMs.p99.toFixed(1)} ms, ${result.acknowledgedPerSecond.toFixed(0)} acknowledged/s, sender CPU ${result.senderCpuPercent.toFixed(0)} %`,
      );
    } finally {
      for (const serve of serves) {
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
type Run = [key: string, storage: 'pglite' | 'postgres', instances: number];
const runs: Run[] = STORAGES.flatMap((storage): Run[] =>
  storage === 'postgres'
    ? INSTANCES.map((n): Run => [n === 1 ? storage : `${storage}-${n}`, storage, n])
    : [[storage, storage, 1]],
);
for (const [key, storage, n] of runs) results[key] = await onStorage(storage, n);
const ms = (x: number) => (Number.isNaN(x) ? '-' : x >= 100 ? x.toFixed(0) : x.toFixed(1));
printTable(
  [
    'storage',
    'rate/s',
    'p50 ms',
    'p90 ms',
    'p99 ms',
    'max ms',
    'growth',
    'API p99 ms',
    'missing',
    'errors',
    'ack/s',
    'CPU %',
  ],
  runs.flatMap(([key]) =>
    (results[key] ?? []).map((r) => [
      key,
      String(r.rate),
      ms(r.latencyMs.p50),
      ms(r.latencyMs.p90),
      ms(r.latencyMs.p99),
      ms(r.latencyMs.max),
      `${r.growth.toFixed(2)}x`,
      ms(r.apiMs.p99),
      String(r.missing),
      String(r.errors),
      r.acknowledgedPerSecond.toFixed(0),
      r.senderCpuPercent.toFixed(0),
    ]),
  ),
);
console.log(`\nwritten to ${writeResults('latency', { seconds: SECONDS, ...results })}`);
