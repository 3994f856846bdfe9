/**
 * pnpm bench:http — requests per second and latency of each framework, bare and with payhook,
 * over loopback with autocannon (1 KB signed bodies, 50 connections). Each payhook request carries
 * a different event, so the idempotency store never short-cuts the work. Servers run in child
 * processes; ratios compare each adapter with its own bare framework in the same run.
 *
 * The servers load the packages as built (`pnpm build` runs first), as an application installs
 * them: tsx is pointed at tsconfig.base.json, whose lack of `paths` lets `@payhook/*` resolve to
 * the packages' `dist` rather than to their sources. Bare and payhook runs alternate for
 * BENCH_ROUNDS rounds (default 2); each figure is the mean of its rounds, so that a neighbour's
 * load on a shared machine weighs on both sides alike.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { canonicalJson } from '@payhook/core';
import { createTestPayment, signEvent } from '@payhook/core/testing';
import autocannon from 'autocannon';

import { BENCH_BUSINESS_ID, printTable, writeResults } from './lib.js';

const DURATION = Number(process.env.BENCH_DURATION ?? 8);
const CONNECTIONS = 50;
const BODIES = Number(process.env.BENCH_BODIES ?? 150_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const BUILT = fileURLToPath(new URL('../tsconfig.base.json', import.meta.url));

/** Signed events of about 1 KB each, in the sender's encoding (data in RFC 8785 order). */
function makeBodies(n: number): string[] {
  const template = createTestPayment({ method: 'card', status: 'settled' });
  const bodies: string[] = [];
  for (let i = 0; i < n; i++) {
    const data = { ...template, id: crypto.randomUUID(), reference: `ref_${i}` };
    const { checksum } = signEvent('payment.session.succeeded', data, BENCH_BUSINESS_ID);
    bodies.push(
      `{"event":"payment.session.succeeded","data":${canonicalJson(data)},"checksum":"${checksum}"}`,
    );
  }
  return bodies;
}

async function startServer(framework: string, mode: string): Promise<{ port: number; child: ChildProcess }> {
  const script = fileURLToPath(new URL('./http-server.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', script, framework, mode], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, TSX_TSCONFIG_PATH: BUILT },
  });
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
    lines.once('line', (line) => resolve(JSON.parse(line).port));
  });
  return { port, child };
}

async function stop(child: ChildProcess): Promise<void> {
  await new Promise((resolve) => {
    child.once('exit', resolve);
    child.kill('SIGTERM');
  });
}

const bodies = makeBodies(BODIES);
console.log(
  `${bodies.length} signed bodies of ${bodies[0]?.length} bytes; ${DURATION} s per run, ${CONNECTIONS} connections\n`,
);

type Run = { rps: number; p50: number; p99: number; non2xx: number };
const runs: Record<string, Run[]> = {};
let next = 0;
for (let round = 1; round <= ROUNDS; round++) {
  for (const framework of ['express', 'koa', 'fastify']) {
    for (const mode of ['bare', 'payhook']) {
      const { port, child } = await startServer(framework, mode);
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
      const result = await run(DURATION);
      await stop(child);
      const key = `${framework} ${mode}`;
      // Each server starts with an empty store: only a payhook run longer than the bodies would
      // see duplicates (answered without processing), which would flatter it.
      if (mode === 'payhook' && next - first > bodies.length) {
        console.log(`note: ${key} reused bodies (${next - first} requests, ${bodies.length} bodies)`);
      }
      runs[key] ??= [];
      runs[key].push({
        rps: result.requests.average,
        p50: result.latency.p50,
        p99: result.latency.p99,
        non2xx: result.non2xx,
      });
      console.log(
        `round ${round}: ${key.padEnd(15)} ${Math.round(result.requests.average)} req/s, p99 ${result.latency.p99} ms`,
      );
    }
  }
}

const mean = (xs: number[]) => Math.round((xs.reduce((a, b) => a + b, 0) / xs.length) * 100) / 100;
const results: Record<
  string,
  Run & { rounds: Run[]; xReqPerSec?: number; xP99?: number; reqPerSecTarget?: string; p99Target?: string }
> = {};
for (const [key, list] of Object.entries(runs)) {
  results[key] = {
    rps: mean(list.map((r) => r.rps)),
    p50: mean(list.map((r) => r.p50)),
    p99: mean(list.map((r) => r.p99)),
    non2xx: list.reduce((a, r) => a + r.non2xx, 0),
    rounds: list,
  };
}

const rows: string[][] = [];
const failures: string[] = [];
for (const framework of ['express', 'koa', 'fastify']) {
  const bare = results[`${framework} bare`];
  const ph = results[`${framework} payhook`];
  if (!bare || !ph) continue;
  const xRps = ph.rps / bare.rps;
  const xP99 = ph.p99 / Math.max(bare.p99, 1);
  ph.xReqPerSec = Math.round(xRps * 100) / 100;
  ph.xP99 = Math.round(xP99 * 100) / 100;
  ph.reqPerSecTarget = xRps >= 0.6 ? 'met (>= 0.6x)' : 'MISSED (>= 0.6x)';
  ph.p99Target = xP99 <= 2 ? 'met (<= 2x)' : 'MISSED (<= 2x)';
  for (const [mode, r] of [
    ['bare', bare],
    ['payhook', ph],
  ] as const) {
    rows.push([
      framework,
      mode,
      Math.round(r.rps).toLocaleString('en-US'),
      `${r.p50} ms`,
      `${r.p99} ms`,
      String(r.non2xx),
      mode === 'payhook' ? xRps.toFixed(2) : '1.00',
      mode === 'payhook' ? xP99.toFixed(2) : '1.00',
      mode === 'payhook' ? `${xRps >= 0.6 ? 'met' : 'MISSED'} / ${xP99 <= 2 ? 'met' : 'MISSED'}` : '',
    ]);
  }
  if (xRps < 0.6) failures.push(`${framework}: ${xRps.toFixed(2)}x req/s (target 0.6x)`);
  if (xP99 > 2) failures.push(`${framework}: p99 ${ph.p99} ms vs ${bare.p99} ms (target 2x)`);
}
console.log();
printTable(
  ['framework', 'route', 'req/s', 'p50', 'p99', 'non-2xx', 'x req/s', 'x p99', 'req/s / p99 target'],
  rows,
);
console.log(`\nresults written to ${writeResults('http', results).replace(process.cwd(), '.')}`);
console.log(
  failures.length > 0 ? `\nbelow target:\n${failures.join('\n')}` : '\nevery adapter meets both targets',
);
