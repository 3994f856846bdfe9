/**
 * pnpm bench:flood — a flood of clients: BENCH_FLOOD_CONNECTIONS clients (default 4,000), each on a
 * connection of its own, create payment sessions for BENCH_FLOOD_SECONDS (default 15), each sending
 * its next request as soon as it has an answer, and waiting the answer's Retry-After (with jitter)
 * after a 503, as a well-behaved client does. Far more than the sender can serve at once: what
 * each client waits for an answer, which answers it gets, and whether a connection is reset.
 *
 * Runs: PGlite with the API's wait on the database bounded (`PAYHOOK_DB_ACQUIRE_TIMEOUT_MS`, 2 s,
 * the default), PGlite with the bound at 600 s (as good as none: how the sender answered before it
 * had one), and PostgreSQL with the default bound. BENCH_FLOOD_RUNS picks some
 * (`pglite,pglite-unbounded,postgres`).
 *
 * Method: `payhook serve` (the built CLI, one process) in a child process, on a fresh PGlite
 * directory or PostgreSQL database (TEST_DATABASE_URL's server; dropped afterwards); this process
 * is the clients (node:http, keep-alive, one socket per client; an answer not in within 30 s counts
 * as `no answer`) and the webhook receiver, which notes each session's event. The answer time is
 * from a request's start to its answer read, for every request; `first 2 s` is that of the requests
 * sent in the first two seconds, when every client connects at once. After the run, the bench
 * waits up to 60 s for every acknowledged session's event (`missing`: those still not delivered).
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { Agent } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { sessionRequest } from '../packages/sender/test/fixtures/requests.js';
import {
  BENCH_DATABASE_URL,
  makeDatabase,
  postText,
  printTable,
  quantile,
  startReceiver,
  startServe,
  stopServe,
  writeResults,
} from './lib.js';

const KEY = 'sk_test_bench_flood';
const CONNECTIONS = Number(process.env.BENCH_FLOOD_CONNECTIONS ?? 4000);
const SECONDS = Number(process.env.BENCH_FLOOD_SECONDS ?? 15);
const RUNS = (process.env.BENCH_FLOOD_RUNS ?? 'pglite,pglite-unbounded,postgres').split(',');

interface FloodResult {
  run: string;
  /** Answers by status code, and requests with none by why (`reset`, `no answer`). */
  answers: Record<string, number>;
  acknowledgedPerSecond: number;
  /** Answer time of every request, in ms. */
  answerMs: { p50: number; p99: number; max: number };
  /** Answer time of the requests sent in the first two seconds (every client connecting), in ms. */
  firstMs: { p50: number; p99: number; max: number };
  /** Acknowledged sessions whose event had not arrived 60 s after the run. */
  missing: number;
}

const quantiles = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return { p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99), max: sorted.at(-1) ?? 0 };
};

async function flood(run: string, base: string, arrived: Map<string, number>, receiverUrl: string) {
  const headers = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
  const settings = await fetch(`${base}/accounts/settings`, {
    method: 'PATCH',
    headers,
    body: JSON.stringify({ require_mfa: false, webhook_urls: [receiverUrl] }),
  });
  if (settings.status !== 200) throw new Error(`settings: ${settings.status} ${await settings.text()}`);
  const agent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS });
  const answers: Record<string, number> = {};
  const times: number[] = [];
  const first: number[] = [];
  const ids: string[] = [];
  const start = performance.now();
  const end = start + SECONDS * 1000;
  const client = async () => {
    while (performance.now() < end) {
      const sent = performance.now();
      let answer: string;
      let retryAfter = 0;
      try {
        const { status, text } = await postText(
          `${base}/payment-sessions`,
          headers,
          JSON.stringify({ ...sessionRequest, reference: `flood-${randomBytes(6).toString('hex')}` }),
          agent,
        );
        // A refusal by its status and code, say `503 database_unavailable`.
        answer = status === 201 ? '201' : `${status} ${/"code":"(\w+)"/.exec(text)?.[1] ?? ''}`.trim();
        if (status === 201)
          ids.push((JSON.parse(text) as { data: { payment: { id: string } } }).data.payment.id);
        if (status === 503) retryAfter = 1;
      } catch (error) {
        answer = (error as { code?: string }).code === 'ECONNRESET' ? 'reset' : 'no answer';
      }
      answers[answer] = (answers[answer] ?? 0) + 1;
      const took = performance.now() - sent;
      times.push(took);
      if (sent - start < 2000) first.push(took);
      // A well-behaved client: the answer's Retry-After, with jitter, before it tries again.
      if (retryAfter > 0) await sleep(retryAfter * 1000 * (0.5 + Math.random()));
    }
  };
  await Promise.all(Array.from({ length: CONNECTIONS }, client));
  const runMs = performance.now() - start;
  agent.destroy();
  const deadline = performance.now() + 60_000;
  while (performance.now() < deadline && ids.some((id) => !arrived.has(id))) await sleep(100);
  return {
    run,
    answers,
    acknowledgedPerSecond: ids.length / (runMs / 1000),
    answerMs: quantiles(times),
    firstMs: quantiles(first),
    missing: ids.filter((id) => !arrived.has(id)).length,
  } satisfies FloodResult;
}

const results: FloodResult[] = [];
for (const run of RUNS) {
  const arrived = new Map<string, number>();
  const receiver = await startReceiver(arrived);
  const dir = await mkdtemp(join(tmpdir(), 'payhook-bench-flood-'));
  const admin = new pg.Client({ connectionString: BENCH_DATABASE_URL });
  let drop: (() => Promise<unknown>) | undefined;
  let serve: Awaited<ReturnType<typeof startServe>> | undefined;
  try {
    let args = ['--data-dir', join(dir, 'data')];
    if (run === 'postgres') {
      await admin.connect();
      const database = await makeDatabase(admin, `payhook_bench_flood_${randomBytes(4).toString('hex')}`);
      drop = database.drop;
      args = ['--database-url', database.url];
    } else if (run !== 'pglite' && run !== 'pglite-unbounded') throw new Error(`Unknown run: ${run}`);
    const env: Record<string, string> = { PAYHOOK_API_KEYS: `${KEY}:biz-flood:test` };
    if (run === 'pglite-unbounded') env.PAYHOOK_DB_ACQUIRE_TIMEOUT_MS = '600000';
    serve = await startServe(args, join(dir, 'serve.log'), env);
    results.push(await flood(run, serve.base, arrived, receiver.url));
  } finally {
    if (serve) await stopServe(serve);
    receiver.server.close();
    await drop?.();
    await admin.end().catch(() => {});
    await rm(dir, { recursive: true, force: true });
  }
}

const ms = (n: number) => `${Math.round(n).toLocaleString('en-US')} ms`;
printTable(
  ['run', 'answers', 'acknowledged/s', 'p50', 'p99', 'max', 'first 2 s p99', 'missing'],
  results.map((r) => [
    r.run,
    Object.entries(r.answers)
      .map(([k, n]) => `${k}: ${n}`)
      .join(', '),
    Math.round(r.acknowledgedPerSecond).toString(),
    ms(r.answerMs.p50),
    ms(r.answerMs.p99),
    ms(r.answerMs.max),
    ms(r.firstMs.p99),
    String(r.missing),
  ]),
);
console.log(
  `\nwritten to ${writeResults('flood', { connections: CONNECTIONS, seconds: SECONDS, runs: results })}`,
);
