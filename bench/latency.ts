/**
 * pnpm bench:latency — from the API's 201 to the receiver's door: how long a
 * `payment.session.created` event takes to arrive while sessions are created at a steady rate, on
 * the sender's two storages (PGlite, the default of `payhook serve`, and PostgreSQL), at
 * BENCH_LATENCY_RATES creations a second (default 50,100,200) for BENCH_LATENCY_SECONDS each
 * (default 20, after 6 s of warm-up, the rate rising from 0); BENCH_LATENCY_STORAGES picks the storages
 * (default pglite,postgres), and BENCH_LATENCY_PROCESSES how many sender processes `payhook serve
 * --processes` runs on PostgreSQL (default 1; `1,2` runs both). PGlite runs again at
 * BENCH_LATENCY_BUSY_RATES (default 400; empty for none) with the machine's other core kept busy by
 * a CPU loop in another process: the sandbox on a developer's machine that does other work.
 *
 * With several processes, they share the port (the primary hands out the client's connections in
 * turn) and one PostgreSQL, as instances on several machines share it behind a load balancer: how
 * the sender goes on past one process. Also reported: the sessions acknowledged a
 * second, the sender processes' CPU (of one core) over the run, and on PostgreSQL what its active
 * backends were waiting on (`pg_stat_activity`, sampled every 250 ms: `CPU` is no wait).
 *
 * Method: `payhook serve` (the built CLI, as a user runs it, its log lines written to a file) in a
 * child process, on a fresh PGlite directory or a fresh PostgreSQL database (TEST_DATABASE_URL's
 * server; dropped afterwards). This process is the client and the receiver: it starts one `POST
 * /payment-sessions` every 1/rate seconds whatever the answers (open loop, node:http's keep-alive
 * connections; an answer not in within 30 s counts as an error), notes when each 201 arrives, and
 * its node:http receiver on 127.0.0.1 notes when each event arrives. BENCH_LATENCY_TIMELINE=1
 * prints each second's sessions and latency, and the errors by kind; BENCH_LATENCY_LOG=<file> keeps the
 * last sender's log there (its `delivery attempt` lines time each attempt). The latency of a session is arrival - 201 (one clock).
 * Also: the API's own answer time, and the p50 of the first and the last third of the run, whose
 * ratio says whether the latency grows during a run (a sender that falls behind).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { sessionRequest } from '../packages/sender/test/fixtures/requests.js';
import {
  BENCH_DATABASE_URL,
  createSessionsAtRate,
  latencyOf,
  ownCpu,
  printTable,
  quantile,
  sleep,
  startReceiver,
  startServe,
  stopServe,
  writeResults,
} from './lib.js';

const RATES = (process.env.BENCH_LATENCY_RATES ?? '50,100,200').split(',').filter(Boolean).map(Number);
const PROCESSES = (process.env.BENCH_LATENCY_PROCESSES ?? process.env.BENCH_LATENCY_INSTANCES ?? '1')
  .split(',')
  .map(Number);
const SECONDS = Number(process.env.BENCH_LATENCY_SECONDS ?? 20);
/** PGlite's rates with the other core kept busy (default 400; empty for none). */
const BUSY_RATES = (process.env.BENCH_LATENCY_BUSY_RATES ?? '400').split(',').filter(Boolean).map(Number);
/** The warm-up: the rate rises from 0 to the run's over this long, as a provider's peak comes. */
const WARMUP_SECONDS = 6;
const KEY = 'sk_test_bench_latency';
const BUSINESS = 'biz-bench-latency';

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
  /** The errors by answer: a status code (`'503'`: refused, the database busy), or `'no answer'` in 30 s. */
  errorsByAnswer: Record<string, number>;
  /** Sessions acknowledged a second over the run. */
  acknowledgedPerSecond: number;
  /** The sender processes' CPU time over the run's wall time, in % of one core. */
  senderCpuPercent: number;
  /** PostgreSQL: the share of active backends' samples per wait event, the largest first. */
  waits?: Record<string, number>;
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
  let cpuBefore = 0;
  let clientCpuBefore = 0;
  let waits: ReturnType<typeof sampleWaits> | undefined;
  const { created, errors, errorKinds, errorsByAnswer, start, runMs } = await createSessionsAtRate({
    bases,
    apiKey: KEY,
    rate,
    seconds: SECONDS,
    warmupSeconds: WARMUP_SECONDS,
    body: (n) => ({ ...sessionRequest, reference: `bench-${rate}-${n}-${randomBytes(4).toString('hex')}` }),
    onMeasuring: () => {
      clientCpuBefore = ownCpu();
      cpuBefore = watch.pids.reduce((sum: number, pid) => sum + cpuMs(pid), 0);
      waits = sampleWaits(watch.database);
    },
  });
  const cpu = watch.pids.reduce((sum: number, pid) => sum + cpuMs(pid), 0) - cpuBefore;
  const waited = await waits?.stop();
  // Every event in, or 10 s: the timeline below reads the arrivals too.
  const latency = await latencyOf(created, arrived);

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
    const clientUs = ownCpu() - clientCpuBefore;
    console.error(`  this process (client and receiver): ${(clientUs / 10 / runMs).toFixed(0)} % of a core`);
  }
  const result: RunResult = {
    rate,
    ...latency,
    errors,
    errorsByAnswer,
    acknowledgedPerSecond: (latency.sessions * 1000) / runMs,
    senderCpuPercent: (100 * cpu) / runMs,
    ...(waited ? { waits: waited } : {}),
  };
  return result;
}

/** The process `pid` and its children (the sender processes of `serve --processes`). */
function withChildren(pid: number | undefined): (number | undefined)[] {
  if (pid === undefined) return [];
  try {
    const children = execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' });
    return [pid, ...children.trim().split('\n').filter(Boolean).map(Number)];
  } catch {
    return [pid]; // pgrep exits 1 when there is no child
  }
}

async function onStorage(storage: 'pglite' | 'postgres', processes = 1, rates = RATES): Promise<RunResult[]> {
  const results: RunResult[] = [];
  for (const rate of rates) {
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
      const env = { PAYHOOK_API_KEYS: `${KEY}:${BUSINESS}:test` };
      serve = await startServe([...args, '--processes', String(processes)], join(dir, 'serve.log'), env);
      const result = await measure([serve.base], receiver.url, arrived, rate, {
        pids: withChildren(serve.child.pid),
        ...(storage === 'postgres' ? { database } : {}),
      });
      results.push(result);
      console.error(
        `${storage} x${processes} ${rate}/s: p50 ${result.latencyMs.p50.toFixed(1)} ms, p99 ${result.latencyMs.p99.toFixed(1)} ms, ${result.acknowledgedPerSecond.toFixed(0)} acknowledged/s, sender CPU ${result.senderCpuPercent.toFixed(0)} %`,
      );
    } finally {
      if (serve) await stopServe(serve);
      if (process.env.BENCH_LATENCY_LOG)
        await copyFile(join(dir, 'serve.log'), process.env.BENCH_LATENCY_LOG);
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
    ? PROCESSES.map((n): Run => [n === 1 ? storage : `${storage}-${n}`, storage, n])
    : [[storage, storage, 1]],
);
for (const [key, storage, n] of runs) results[key] = await onStorage(storage, n);
if (BUSY_RATES.length > 0 && STORAGES.includes('pglite')) {
  // The embedded default at a sandbox's peak on a machine with other work: a CPU loop in another
  // process keeps a core busy while PGlite runs at each of BENCH_LATENCY_BUSY_RATES.
  const busy = spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });
  try {
    results['pglite-busy'] = await onStorage('pglite', 1, BUSY_RATES);
    runs.push(['pglite-busy', 'pglite', 1]);
  } finally {
    busy.kill('SIGKILL');
  }
}
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
