import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { Agent, createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

// The sender seals signing secrets with PAYHOOK_SECRET_KEY and refuses PostgreSQL without one: the
// benchmarks' key, fixed so that a database a benchmark keeps between runs opens again, and
// inherited by the processes they spawn. One set in the environment wins.
process.env.PAYHOOK_SECRET_KEY ||= 'kbench:isUt9DSvzKD0uHOnFLfL0_DQ-4oSXHkFbt1TkmQIVLI';

/** Operations per second of `fn`: median of `rounds` timed rounds after a warm-up. */
export async function opsPerSecond(
  fn: () => unknown,
  { roundMs = 400, rounds = 5 }: { roundMs?: number; rounds?: number } = {},
): Promise<number> {
  const round = timedRound(fn);
  await round(roundMs / 2);
  const results: number[] = [];
  for (let r = 0; r < rounds; r++) results.push(await round(roundMs));
  return median(results);
}

/**
 * How fast `b` is against `a` (ops/s of b over ops/s of a), from rounds of the two taken in turn:
 * a machine that slows down for a while slows both sides of a pair, so the ratio holds where two
 * separate measurements would not. The median of the rounds' ratios.
 */
export async function pairedRatio(
  a: () => unknown,
  b: () => unknown,
  { roundMs = 200, rounds = 9 }: { roundMs?: number; rounds?: number } = {},
): Promise<number> {
  const [roundA, roundB] = [timedRound(a), timedRound(b)];
  await roundA(roundMs / 2);
  await roundB(roundMs / 2);
  const ratios: number[] = [];
  for (let r = 0; r < rounds; r++) {
    // Alternate which side goes first, so neither always runs on a warmer or colder machine.
    let opsA: number;
    let opsB: number;
    if (r % 2 === 0) {
      opsA = await roundA(roundMs);
      opsB = await roundB(roundMs);
    } else {
      opsB = await roundB(roundMs);
      opsA = await roundA(roundMs);
    }
    ratios.push(opsB / opsA);
  }
  return median(ratios);
}

const median = (values: number[]) =>
  [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)] as number;

/** One timed round of `fn` for `ms`: its ops/s. */
function timedRound(fn: () => unknown): (ms: number) => Promise<number> {
  const isAsync = fn() instanceof Promise;
  return async (ms) => {
    let n = 0;
    const start = process.hrtime.bigint();
    const deadline = start + BigInt(ms) * 1_000_000n;
    let now = start;
    while (now < deadline) {
      // Batches keep the clock out of the measurement for fast functions.
      for (let k = 0; k < 16; k++) {
        if (isAsync) await fn();
        else fn();
      }
      n += 16;
      now = process.hrtime.bigint();
    }
    return (n * 1e9) / Number(now - start);
  };
}

/** Formats a number of operations per second for a table. */
export function fmt(n: number): string {
  return n >= 100 ? Math.round(n).toLocaleString('en-US') : n.toFixed(1);
}

/** Prints rows as an aligned text table. */
export function printTable(header: string[], rows: string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ');
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const r of rows) console.log(line(r));
}

/**
 * Writes a benchmark's results as JSON under bench/results/, or under `BENCH_RESULTS_DIR` when
 * set (the tests that run a benchmark at a small size, which must not replace the figures).
 */
export function writeResults(name: string, data: unknown): string {
  const dir = process.env.BENCH_RESULTS_DIR
    ? `${process.env.BENCH_RESULTS_DIR.replace(/\/$/, '')}/`
    : fileURLToPath(new URL('./results/', import.meta.url));
  mkdirSync(dir, { recursive: true });
  const file = `${dir}${name}.json`;
  const meta = {
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
    date: new Date().toISOString(),
  };
  writeFileSync(file, `${JSON.stringify({ ...meta, results: data }, null, 2)}\n`);
  return file;
}

/** The business id the benchmark receivers are configured with. */
export const BENCH_BUSINESS_ID = '9c4a2b1e-7d3f-4e8a-b5c6-1a2b3c4d5e6f';

/** The PostgreSQL server of the benchmarks: TEST_DATABASE_URL, never the service's DATABASE_URL. */
export const BENCH_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** A database of its own on the benchmarks' server (`server`, a client of it): its URL, and how to drop it. */
export async function makeDatabase(server: { query(text: string): Promise<unknown> }, name: string) {
  await server.query(`create database ${name}`);
  const url = new URL(BENCH_DATABASE_URL);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => server.query(`drop database if exists ${name} with (force)`) };
}

/**
 * Runs `measure` on PostgreSQL, given a fresh schema name (dropped afterwards), then on PGlite,
 * given a data directory in a temporary folder (removed afterwards).
 */
export async function onEachStorage<T>(
  name: string,
  measure: (storage: 'postgres' | 'pglite', where: string) => Promise<T>,
): Promise<{ postgres: T; pglite: T }> {
  const schema = `payhook_bench_${randomBytes(4).toString('hex')}`;
  let postgres: T;
  try {
    postgres = await measure('postgres', schema);
  } finally {
    const client = new pg.Client({ connectionString: BENCH_DATABASE_URL });
    await client.connect();
    await client.query(`drop schema if exists ${schema} cascade`);
    await client.end();
  }
  const dir = await mkdtemp(join(tmpdir(), `payhook-bench-${name}-`));
  try {
    return { postgres, pglite: await measure('pglite', join(dir, 'data')) };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** This process's CPU time so far, in µs (user + system). */
export function ownCpu(): number {
  const { user, system } = process.cpuUsage();
  return user + system;
}

/** The CPU time (user + system, µs) /proc gives for the process `entry`, and its command name. */
function procCpu(entry: string): { name: string; us: number } | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${entry}/stat`, 'utf8').trim();
  } catch {
    return undefined; // gone, or not ours to read
  }
  const match = /^\d+ \((.*)\) (.*)$/.exec(stat);
  if (!match) return undefined;
  const fields = (match[2] as string).split(' ');
  // utime, stime (fields 14 and 15 of stat), in clock ticks of 1/100 s on Linux (USER_HZ).
  return { name: match[1] as string, us: (Number(fields[11]) + Number(fields[12])) * 10_000 };
}

/**
 * The CPU time so far, in µs, of each process named `name` on this machine (`postgres`,
 * `redis-server`) by pid, read from /proc (Linux); empty elsewhere. {@link cpuSince} turns two
 * samples into the CPU spent between them.
 */
export function cpuOfProcesses(name: string): Map<number, number> {
  const sample = new Map<number, number>();
  if (process.platform !== 'linux') return sample;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cpu = procCpu(entry);
    if (cpu?.name === name) sample.set(Number(entry), cpu.us);
  }
  return sample;
}

/**
 * The CPU spent since `before` by the processes sampled again in `after` (one that started
 * meanwhile counts whole, one that ended meanwhile is not seen); `undefined` if none was seen.
 */
export function cpuSince(before: Map<number, number>, after: Map<number, number>): number | undefined {
  if (after.size === 0) return undefined;
  let us = 0;
  for (const [pid, now] of after) us += now - (before.get(pid) ?? 0);
  return us;
}

/** CPU time so far, in µs, of the processes `pids` (children of this one); `undefined` off Linux. */
export function cpuOfPids(pids: number[]): number | undefined {
  if (process.platform !== 'linux') return undefined;
  return pids.reduce((sum, pid) => sum + (procCpu(String(pid))?.us ?? 0), 0);
}

/**
 * CPU time of the PostgreSQL server's processes so far, in µs, read from /proc (Linux, with the
 * server on this machine); `undefined` where that cannot be read.
 */
export function postgresCpu(): number | undefined {
  const sample = cpuOfProcesses('postgres');
  return sample.size === 0 ? undefined : [...sample.values()].reduce((a, b) => a + b, 0);
}

/** The bytes of every file under `dir`, its subdirectories included (what it takes on disk). */
export function directoryBytes(dir: string): number {
  let bytes = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) bytes += directoryBytes(path);
    else if (entry.isFile()) bytes += statSync(path).size;
  }
  return bytes;
}

// The sender as a user runs it, and the client and receiver around it (latency, history).

/** Wall-clock time in ms, with sub-millisecond precision: one clock for the client and the receiver. */
export const now = () => performance.timeOrigin + performance.now();
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The `q` quantile of ascending `sorted`; NaN when empty. */
export function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
}

const cli = fileURLToPath(new URL('../packages/cli/dist/cli.js', import.meta.url));

/**
 * `payhook serve` (the built CLI) with `args`, and `env` over this process's, once it listens. Its
 * output goes to a file, as a log collector takes it: a pipe read by this busy process stalled it.
 * BENCH_SERVE_NODE_ARGS adds node's own flags to it (say `--cpu-prof --cpu-prof-dir=<dir>`, which
 * NODE_OPTIONS refuses).
 */
export async function startServe(
  args: string[],
  logFile: string,
  env: Record<string, string>,
): Promise<{ child: ChildProcess; base: string }> {
  const out = openSync(logFile, 'w');
  // One sender process unless the bench asks for more: runs stay comparable over time.
  const processes = args.includes('--processes') ? [] : ['--processes', '1'];
  const child = spawn(
    process.execPath,
    [
      ...(process.env.BENCH_SERVE_NODE_ARGS?.split(' ').filter(Boolean) ?? []),
      cli,
      'serve',
      '--port',
      '0',
      '--allow-private-webhooks',
      ...processes,
      ...args,
    ],
    {
      env: { ...process.env, DATABASE_URL: '', LOG_LEVEL: 'info', ...env },
      stdio: ['ignore', out, out],
    },
  );
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
    await sleep(10);
  }
}

/** Stops a `payhook serve` of {@link startServe}, once it has exited. */
export async function stopServe(serve: { child: ChildProcess }): Promise<void> {
  if (serve.child.exitCode !== null || serve.child.signalCode !== null) return;
  const exited = once(serve.child, 'exit');
  serve.child.kill('SIGTERM');
  await exited;
}

/**
 * A webhook receiver on 127.0.0.1 that answers 200 on every path and notes, in `arrived`, when
 * each session's first `payment.session.created` event arrives (by payment id).
 */
export async function startReceiver(
  arrived: Map<string, number>,
): Promise<{ server: Server; url: string; origin: string }> {
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
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { server, url: `${origin}/webhooks/`, origin };
}

/** A session the API acknowledged: its payment id, when the 201 was read, the API's time, past the warm-up or not. */
export interface Creation {
  id: string;
  at: number;
  apiMs: number;
  measured: boolean;
}

/**
 * Creates payment sessions open loop: one `POST /payment-sessions` every 1/rate seconds whatever
 * the answers (node:http's keep-alive connections, at most 256, each to the next of `bases` in turn; an answer not
 * in within 30 s counts as an error), after a warm-up of `warmupSeconds` over which the rate rises
 * from 0, as a peak comes. `onMeasuring` runs when the warm-up ends. Resolves once every answer is in.
 */
export async function createSessionsAtRate(options: {
  bases: string[];
  apiKey: string;
  rate: number;
  seconds: number;
  warmupSeconds: number;
  body: (n: number) => unknown;
  onMeasuring?: () => void;
}): Promise<{
  created: Creation[];
  errors: number;
  /** Errors by their detail: the status and the start of its body, or why no answer came. */
  errorKinds: Map<string, number>;
  /** Errors by answer: the status code (`'503'`), or `'no answer'` (a client timeout, a reset). */
  errorsByAnswer: Record<string, number>;
  start: number;
  runMs: number;
}> {
  const { bases, rate, warmupSeconds } = options;
  const headers = { authorization: `Bearer ${options.apiKey}`, 'content-type': 'application/json' };
  const created: Creation[] = [];
  let errors = 0;
  const errorKinds = new Map<string, number>();
  const errorsByAnswer: Record<string, number> = {};
  const countError = (answer: string, kind: string) => {
    errors++;
    errorKinds.set(kind, (errorKinds.get(kind) ?? 0) + 1);
    errorsByAnswer[answer] = (errorsByAnswer[answer] ?? 0) + 1;
  };
  let n = 0;
  // node:http with keep-alive connections, not fetch: at 500 a second fetch cost this process 48 %
  // of a core against 26 % (its streams, a timer per request), CPU that on a shared machine is the
  // sender's and its database's.
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const create = async (measured: boolean) => {
    const started = now();
    const k = n++;
    const { status, text } = await postText(
      `${bases[k % bases.length]}/payment-sessions`,
      headers,
      JSON.stringify(options.body(k)),
      agent,
    );
    const at = now();
    if (status !== 201) return countError(String(status), `${status} ${text.slice(0, 80)}`);
    const id = (JSON.parse(text) as { data: { payment: { id: string } } }).data.payment.id;
    created.push({ id, at, apiMs: at - started, measured });
  };
  const inFlight = new Set<Promise<void>>();
  // Warm-up sessions, the rate rising from 0: the k-th at sqrt(2 W k / rate) seconds.
  const warmup = Math.floor((rate * warmupSeconds) / 2);
  const total = warmup + options.seconds * rate;
  const dueOf = (i: number) =>
    i < warmup
      ? 1000 * Math.sqrt((2 * warmupSeconds * i) / rate)
      : 1000 * warmupSeconds + ((i - warmup) * 1000) / rate;
  const start = now();
  let measuredFrom = start;
  for (let i = 0; i < total; i++) {
    const wait = start + dueOf(i) - now();
    if (wait > 1) await sleep(wait);
    if (i === warmup) {
      measuredFrom = now();
      options.onMeasuring?.();
    }
    const p = create(i >= warmup).catch((e: unknown) =>
      countError('no answer', String((e as { cause?: unknown }).cause ?? e).slice(0, 80)),
    );
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p));
  }
  await Promise.all(inFlight);
  agent.destroy();
  return { created, errors, errorKinds, errorsByAnswer, start, runMs: now() - measuredFrom };
}

/**
 * POSTs `body` through `agent` and reads the answer; an answer not in within 30 s (a sender far
 * behind) fails, as does a refused or broken connection. The benches' load generator: node:http
 * with keep-alive connections, not fetch, which cost the client process twice the CPU (its
 * streams, a timer per request), CPU that on a shared machine is the measured process's.
 */
export function postText(
  url: string,
  headers: Record<string, string>,
  body: string,
  agent: Agent,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: 'POST', agent, headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          clearTimeout(timer);
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') });
        });
        res.on('error', reject);
      },
    );
    const timer = setTimeout(() => req.destroy(new Error('no answer within 30 s')), 30_000);
    req.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    req.end(body);
  });
}

/**
 * Once every session's event has arrived (or `waitMs` has passed): the measured sessions' latency
 * from the 201 to the receiver, in ms, and the API's own time; `missing`, those whose event has
 * not arrived; `growth`, the p50 of the last third of the run over the first (falling behind).
 */
export async function latencyOf(created: Creation[], arrived: Map<string, number>, waitMs = 10_000) {
  const deadline = now() + waitMs;
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
  return {
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
  };
}

/** Signs in to the dashboard at `base` with `apiKey`; its session cookie. */
export { signIn } from '../packages/sender/test/fixtures/sign-in.js';
