/**
 * pnpm bench:http — requests per second and latency of each framework, bare and with payhook,
 * over loopback with autocannon (1 KB signed bodies, 50 connections). Each payhook request carries
 * a different event, so the idempotency store never short-cuts the work. Servers run in child
 * processes; ratios compare each adapter with its own bare framework in the same run.
 *
 * The servers load the packages as built (`pnpm build` runs first), as an application installs
 * them: the script runs with TSX_TSCONFIG_PATH=tsconfig.base.json (package.json), which the
 * servers inherit, and whose lack of `paths` lets `@payhook/*` resolve to the packages' `dist`
 * rather than to their sources.
 *
 * The machine is shared and noisy (its neighbours take CPU time in bursts), so each round measures
 * bare and payhook back to back, in turn first, for BENCH_ROUNDS rounds (default 5) of
 * BENCH_DURATION seconds (default 5); a ratio is the median of the rounds' ratios. The servers
 * also report the CPU time each request cost them, a figure the load generator's share of the two
 * cores does not move.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { encodeSignedEvent } from '@payhook/core';
import { createTestPayment } from '@payhook/core/testing';
import autocannon from 'autocannon';

import { BENCH_BUSINESS_ID, printTable, writeResults } from './lib.js';

const DURATION = Number(process.env.BENCH_DURATION ?? 5);
const CONNECTIONS = 50;
const BODIES = Number(process.env.BENCH_BODIES ?? 300_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);

/** Signed events of about 1 KB each, in the sender's encoding (data in RFC 8785 order). */
function makeBodies(n: number): string[] {
  const template = createTestPayment({ method: 'card', status: 'settled' });
  const bodies: string[] = [];
  for (let i = 0; i < n; i++) {
    const data = { ...template, id: crypto.randomUUID(), reference: `ref_${i}` };
    bodies.push(encodeSignedEvent('payment.session.succeeded', data, BENCH_BUSINESS_ID));
  }
  return bodies;
}

/** A server of the benchmark in its own process, with a line-based control channel. */
interface Server {
  port: number;
  child: ChildProcess;
  /** The server's CPU time so far, in µs. */
  cpu(): Promise<number>;
}

async function startServer(framework: string, mode: string): Promise<Server> {
  const script = fileURLToPath(new URL('./http-server.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', script, framework, mode], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const replies: ((line: string) => void)[] = [];
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
    lines.once('line', (line) => resolve(JSON.parse(line).port));
  });
  lines.on('line', (line) => replies.shift()?.(line));
  const cpu = () =>
    new Promise<number>((resolve) => {
      replies.push((line) => resolve(JSON.parse(line).cpuUs));
      child.stdin?.write('cpu\n');
    });
  return { port, child, cpu };
}

async function stop(child: ChildProcess): Promise<void> {
  await new Promise((resolve) => {
    child.once('exit', resolve);
    child.kill('SIGTERM');
  });
}

const bodies = makeBodies(BODIES);
console.log(
  `${bodies.length} signed bodies of ${bodies[0]?.length} bytes; ${ROUNDS} rounds of ${DURATION} s per run, ${CONNECTIONS} connections\n`,
);

/** One measured run: autocannon's figures and the server's CPU time per request. */
type Run = { rps: number; p50: number; p99: number; non2xx: number; cpuUsPerRequest: number };

async function measure(framework: string, mode: string): Promise<Run> {
  const { port, child, cpu } = await startServer(framework, mode);
  const first = next;
  const run = (duration: number) =>
    autocannon({
      url: `http://127.0.0.1:${port}/webhooks`,
      connections: CONNECTIONS,
      duration,
      requests: [
        {
          method: 'POST',
          setupRequest: (req) => ({
            ...req,
            headers: { 'content-type': 'application/json' },
            body: bodies[next++ % bodies.length] as string,
          }),
        },
      ],
    });
  await run(1); // warm-up
  const cpuBefore = await cpu();
  const result = await run(DURATION);
  const cpuAfter = await cpu();
  await stop(child);
  // Each server starts with an empty store: only a payhook run longer than the bodies would see
  // duplicates (answered without processing), which would flatter it.
  if (mode === 'payhook' && next - first > bodies.length) {
    console.log(
      `note: ${framework} payhook reused bodies (${next - first} requests, ${bodies.length} bodies)`,
    );
  }
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    cpuUsPerRequest: Math.round(((cpuAfter - cpuBefore) / Math.max(1, result.requests.total)) * 10) / 10,
  };
}

const median = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};
const round2 = (x: number) => Math.round(x * 100) / 100;

let next = 0;
const FRAMEWORKS = ['express', 'koa', 'fastify'] as const;
const runs: Record<string, { bare: Run; payhook: Run }[]> = {};
for (let round = 1; round <= ROUNDS; round++) {
  for (const framework of FRAMEWORKS) {
    // Bare and payhook back to back, in turn first, so that a slow spell of the machine weighs on
    // both sides of a pair and drifts cancel out over the rounds.
    const order = round % 2 === 1 ? (['bare', 'payhook'] as const) : (['payhook', 'bare'] as const);
    const pair = {} as { bare: Run; payhook: Run };
    for (const mode of order) pair[mode] = await measure(framework, mode);
    runs[framework] ??= [];
    runs[framework].push(pair);
    console.log(
      `round ${round}: ${framework.padEnd(8)} bare ${Math.round(pair.bare.rps)} req/s p99 ${pair.bare.p99} ms, ` +
        `payhook ${Math.round(pair.payhook.rps)} req/s p99 ${pair.payhook.p99} ms: ` +
        `${(pair.payhook.rps / pair.bare.rps).toFixed(2)}x req/s`,
    );
  }
}

interface Summary {
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  cpuUsPerRequest: number;
  rounds: Run[];
}
const summarize = (list: Run[]): Summary => ({
  rps: round2(median(list.map((r) => r.rps))),
  p50: median(list.map((r) => r.p50)),
  p99: median(list.map((r) => r.p99)),
  non2xx: list.reduce((a, r) => a + r.non2xx, 0),
  cpuUsPerRequest: round2(median(list.map((r) => r.cpuUsPerRequest))),
  rounds: list,
});

const results: Record<string, unknown> = {};
const rows: string[][] = [];
const failures: string[] = [];
for (const framework of FRAMEWORKS) {
  const pairs = runs[framework] ?? [];
  const bare = summarize(pairs.map((p) => p.bare));
  const ph = summarize(pairs.map((p) => p.payhook));
  // The ratios are the medians of each round's ratio, bare and payhook measured back to back.
  const xRps = round2(median(pairs.map((p) => p.payhook.rps / p.bare.rps)));
  const xP99 = round2(median(pairs.map((p) => p.payhook.p99 / Math.max(p.bare.p99, 1))));
  const xCpu = round2(median(pairs.map((p) => p.payhook.cpuUsPerRequest / p.bare.cpuUsPerRequest)));
  const rpsMet = xRps >= 0.6;
  const p99Met = xP99 <= 2;
  results[`${framework} bare`] = bare;
  results[`${framework} payhook`] = {
    ...ph,
    xReqPerSec: xRps,
    xP99,
    xCpuPerRequest: xCpu,
    reqPerSecRounds: pairs.map((p) => round2(p.payhook.rps / p.bare.rps)),
    reqPerSecTarget: rpsMet ? 'met (>= 0.6x)' : 'MISSED (>= 0.6x)',
    p99Target: p99Met ? 'met (<= 2x)' : 'MISSED (<= 2x)',
  };
  for (const [mode, r] of [
    ['bare', bare],
    ['payhook', ph],
  ] as const) {
    const payhook = mode === 'payhook';
    rows.push([
      framework,
      mode,
      Math.round(r.rps).toLocaleString('en-US'),
      `${r.p50} ms`,
      `${r.p99} ms`,
      `${r.cpuUsPerRequest} µs`,
      String(r.non2xx),
      payhook ? xRps.toFixed(2) : '1.00',
      payhook ? xP99.toFixed(2) : '1.00',
      payhook ? xCpu.toFixed(2) : '1.00',
      payhook ? `${rpsMet ? 'met' : 'MISSED'} / ${p99Met ? 'met' : 'MISSED'}` : '',
    ]);
  }
  if (!rpsMet) failures.push(`${framework}: ${xRps.toFixed(2)}x req/s (target 0.6x)`);
  if (!p99Met) failures.push(`${framework}: p99 ${xP99.toFixed(2)}x (target 2x)`);
}
console.log();
printTable(
  [
    'framework',
    'route',
    'req/s',
    'p50',
    'p99',
    'server CPU/req',
    'non-2xx',
    'x req/s',
    'x p99',
    'x CPU/req',
    'req/s / p99 target',
  ],
  rows,
);
console.log(
  "\nFigures are medians over the rounds; each ratio is the median of the rounds' ratios (bare and payhook back to back).",
);
console.log(`\nresults written to ${writeResults('http', results).replace(process.cwd(), '.')}`);
console.log(
  failures.length > 0 ? `\nbelow target:\n${failures.join('\n')}` : '\nevery adapter meets both targets',
);
