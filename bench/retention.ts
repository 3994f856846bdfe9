/**
 * What a retention pass costs delivery. A PostgreSQL database holds two
 * days of a provider's history (BENCH_RETENTION_DAY_EVENTS events a day, default 143,000, seeded
 * as `bench:history` seeds, then brought up by the sender's own migrations); `payhook serve` runs on
 * it with its own retention off. Sessions are created at BENCH_RETENTION_RATE a second (default
 * 200) for BENCH_RETENTION_SECONDS (default 60) and the latency from each 201 to the receiver's
 * door is measured twice: alone, then while another instance (this process, with the sender's
 * `createRetention`) runs a pass that keeps one day and so removes the older one, with its
 * deliveries and attempts. The p99 during the pass over the p99 without it is the figure.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRetention, openDatabase, type RetentionReport } from '@payhook/sender';
import pg from 'pg';
import { sessionRequest } from '../packages/sender/test/fixtures/requests.js';
import { migrateToFirstRelease, seedHistory } from './history-seed.js';
import {
  BENCH_DATABASE_URL,
  createSessionsAtRate,
  latencyOf,
  makeDatabase,
  now,
  printTable,
  startReceiver,
  startServe,
  stopServe,
  writeResults,
} from './lib.js';

const DAY_EVENTS = Number(process.env.BENCH_RETENTION_DAY_EVENTS ?? 143_000);
const RATE = Number(process.env.BENCH_RETENTION_RATE ?? 200);
const SECONDS = Number(process.env.BENCH_RETENTION_SECONDS ?? 60);
const KEY = 'sk_test_bench_retention';
const BUSINESS = 'biz-bench-retention';
const log = (line: string) => console.error(`[retention] ${line}`);

async function main() {
  const server = new pg.Client({ connectionString: BENCH_DATABASE_URL });
  await server.connect();
  const dir = await mkdtemp(join(tmpdir(), 'payhook-bench-retention-'));
  const arrived = new Map<string, number>();
  const receiver = await startReceiver(arrived);
  const made = await makeDatabase(server, `payhook_bench_retention_${process.pid}`);
  const client = new pg.Client({ connectionString: made.url });
  let serve: Awaited<ReturnType<typeof startServe>> | undefined;
  try {
    await migrateToFirstRelease(made.url);
    await client.connect();
    log(`seeding two days of ${DAY_EVENTS.toLocaleString('en-US')} events...`);
    const plan = {
      events: 2 * DAY_EVENTS,
      businesses: 100,
      days: 2,
      bigBusiness: BUSINESS,
      origin: receiver.origin,
    };
    const seeded = await seedHistory(client, plan, log);
    await (await openDatabase({ url: made.url })).close();
    await client.query('analyze');
    await client.query('checkpoint');
    const env = { PAYHOOK_API_KEYS: `${KEY}:${BUSINESS}:test`, PAYHOOK_RETENTION_DAYS: 'off' };
    serve = await startServe(['--database-url', made.url], join(dir, 'serve.log'), env);
    const base = serve.base;
    const measure = async (name: string, during?: () => Promise<RetentionReport>) => {
      const load = loadavg()[0] as number;
      let pass: Promise<{ report: RetentionReport; seconds: number }> | undefined;
      const run = await createSessionsAtRate({
        bases: [base],
        apiKey: KEY,
        rate: RATE,
        seconds: SECONDS,
        warmupSeconds: 5,
        body: (n) => ({ ...sessionRequest, reference: `ret-${name}-${n}` }),
        onMeasuring: () => {
          if (!during) return;
          const t = now();
          pass = during().then((report) => ({ report, seconds: (now() - t) / 1000 }));
        },
      });
      const latency = await latencyOf(run.created, arrived);
      log(`${name}: p50 ${latency.latencyMs.p50.toFixed(1)} ms, p99 ${latency.latencyMs.p99.toFixed(1)} ms`);
      return { latency, errors: run.errors, load, pass: pass ? await pass : undefined };
    };
    const alone = await measure('alone');
    const database = await openDatabase({ url: made.url });
    const retention = createRetention({ database, days: 1, intervalMs: 0 });
    const during = await measure('during a pass', () => retention.run());
    await retention.stop();
    await database.close();
    const removed = during.pass?.report.removed;
    printTable(
      ['', 'p50 ms', 'p99 ms', 'max ms', 'errors'],
      [alone, during].map((side, i) => [
        i === 0 ? 'alone' : 'during the pass',
        side.latency.latencyMs.p50.toFixed(1),
        side.latency.latencyMs.p99.toFixed(1),
        side.latency.latencyMs.max.toFixed(1),
        String(side.errors),
      ]),
    );
    const ratio = during.latency.latencyMs.p99 / alone.latency.latencyMs.p99;
    console.log(
      `\np99 during the pass: ${ratio.toFixed(2)}x; the pass removed ${removed?.events ?? 0} events, ${removed?.deliveries ?? 0} deliveries and ${removed?.delivery_attempts ?? 0} attempts in ${during.pass?.seconds.toFixed(1)} s (${during.pass?.report.batches} batches)`,
    );
    const file = writeResults('retention', {
      dayEvents: DAY_EVENTS,
      rate: RATE,
      seconds: SECONDS,
      seeded: { rows: seeded.rows, seedSeconds: seeded.seedSeconds },
      alone: { latencyMs: alone.latency.latencyMs, errors: alone.errors, missing: alone.latency.missing },
      during: { latencyMs: during.latency.latencyMs, errors: during.errors, missing: during.latency.missing },
      p99Ratio: ratio,
      pass: during.pass && {
        seconds: during.pass.seconds,
        batches: during.pass.report.batches,
        complete: during.pass.report.complete,
        removed,
      },
      machine: { cores: availableParallelism(), load: { alone: alone.load, during: during.load } },
    });
    console.log(`results: ${file}`);
  } finally {
    if (serve) await stopServe(serve);
    receiver.server.closeAllConnections();
    receiver.server.close();
    await client.end().catch(() => {});
    await made.drop();
    await server.end();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
