/**
 * pnpm bench:http — requests per second and latency of each framework, bare and with payhook,
 * over loopback with autocannon (1 KB signed bodies, 50 connections). Each payhook request carries
 * a different event, so the idempotency store never short-cuts the work. Servers run in child
 * processes; ratios compare each adapter with its own bare framework in the same run.
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

const results: Record<string, { rps: number; p50: number; p99: number; non2xx: number }> = {};
for (const framework of ['express', 'koa', 'fastify']) {
  for (const mode of ['bare', 'payhook']) {
    const { port, child } = await startServer(framework, mode);
    let next = 0;
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
    results[`${framework} ${mode}`] = {
      rps: result.requests.average,
      p50: result.latency.p50,
      p99: result.latency.p99,
      non2xx: result.non2xx,
    };
    if (next > bodies.length) console.log(`note: ${framework} ${mode} reused bodies (${next} requests)`);
  }
}

const rows: string[][] = [];
const failures: string[] = [];
for (const framework of ['express', 'koa', 'fastify']) {
  const bare = results[`${framework} bare`];
  const ph = results[`${framework} payhook`];
  if (!bare || !ph) continue;
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
      mode === 'payhook' ? (r.rps / bare.rps).toFixed(2) : '1.00',
      mode === 'payhook' ? (r.p99 / Math.max(bare.p99, 1)).toFixed(2) : '1.00',
    ]);
  }
  if (ph.rps / bare.rps < 0.6)
    failures.push(`${framework}: ${(ph.rps / bare.rps).toFixed(2)}x req/s (target 0.6x)`);
  if (ph.p99 > 2 * Math.max(bare.p99, 1))
    failures.push(`${framework}: p99 ${ph.p99} ms vs ${bare.p99} ms (target 2x)`);
}
printTable(['framework', 'route', 'req/s', 'p50', 'p99', 'non-2xx', 'x req/s', 'x p99'], rows);
console.log(`\nresults written to ${writeResults('http', results).replace(process.cwd(), '.')}`);
if (failures.length > 0) console.log(`\nbelow target:\n${failures.join('\n')}`);
