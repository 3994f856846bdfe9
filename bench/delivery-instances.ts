/**
 * pnpm bench:delivery-instances — deliveries per second with 1, 2 and 4 sender processes sharing
 * one PostgreSQL schema, and how many deliveries reached the receiver twice (0 in a normal run).
 *
 * Method: for each count, a fresh schema (made by `openDatabase`, dropped at the end) and that
 * many sender processes started from the built entry point (`packages/sender/dist/main.js`, as
 * `payhook serve` or a container runs it: API, delivery worker with its defaults, 32 attempts in
 * flight and 4 per URL), all idle, and 2.5 s for their heartbeats to settle which URLs each sends
 * to (each URL is sent to by one instance, so its limit of 4 holds across them). Then
 * BENCH_DELIVERIES deliveries (default 20,000; signed ~1 KB payloads of realistic payments) to 16
 * URLs on one receiver (paths of the delivery benchmarks' node:http receiver in a child process)
 * are inserted in ONE transaction with the NOTIFY that wakes every worker, and the run is timed
 * from that commit until the table says every delivery is delivered (counted every 100 ms). The
 * receiver counts the requests it answered: requests minus deliveries is what was sent twice.
 * The processes share this machine's two cores with PostgreSQL and the receiver, so the figures
 * say how the claim scales under contention, not what more machines would add.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { type Database, openDatabase } from '@payhook/sender';
import { WAKE_CHANNEL } from '@payhook/sender/internal';
import { sql } from 'kysely';
import pg from 'pg';
import { queueDeliveries, startReceiver } from './delivery-fixtures.js';
import { BENCH_DATABASE_URL, printTable, writeResults } from './lib.js';

const N = Number(process.env.BENCH_DELIVERIES ?? 20_000);
const URLS = Number(process.env.BENCH_URLS ?? 16);
const COUNTS = [1, 2, 4];
const MAIN = fileURLToPath(new URL('../packages/sender/dist/main.js', import.meta.url));

/** Starts one sender process on `schema`; resolves once it listens. */
async function startInstance(schema: string): Promise<ChildProcess> {
  const url = new URL(BENCH_DATABASE_URL);
  url.searchParams.set('options', `-c search_path=${schema}`);
  const child = spawn(process.execPath, [MAIN], {
    env: {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: '0',
      LOG_LEVEL: 'info',
      DATABASE_URL: url.toString(),
      PAYHOOK_API_KEYS: 'sk_test_bench_instances:bench:test',
      PAYHOOK_ALLOW_PRIVATE_WEBHOOKS: '1',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    const onData = (chunk: Buffer) => {
      out += chunk;
      if (out.includes('Server listening at')) {
        child.stdout?.off('data', onData);
        child.stdout?.resume();
        resolve();
      }
    };
    child.stdout?.on('data', onData);
    child.once('exit', (code) => reject(new Error(`a sender exited (${code}) before listening:\n${out}`)));
  });
  return child;
}

async function delivered(database: Database): Promise<number> {
  const row = await database.db
    .selectFrom('deliveries')
    .select((eb) => eb.fn.countAll().as('n'))
    .where('status', '=', 'delivered')
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

async function measure(instances: number) {
  const schema = `payhook_bench_${randomBytes(4).toString('hex')}`;
  const database = await openDatabase({ url: BENCH_DATABASE_URL, schema });
  const receiver = await startReceiver();
  const children: ChildProcess[] = [];
  try {
    for (let i = 0; i < instances; i++) children.push(await startInstance(schema));
    // Steady state: every instance has read the others (a heartbeat is 2 s), so each knows its URLs.
    if (instances > 1) await new Promise((resolve) => setTimeout(resolve, 2500));
    const urls = Array.from({ length: URLS }, (_, i) => `${receiver.origin}/u${i}`);
    await database.db.transaction().execute(async (tx) => {
      await queueDeliveries({ ...database, db: tx } as Database, urls, N);
      await sql`select pg_notify(${WAKE_CHANNEL}, '')`.execute(tx);
    });
    const t0 = performance.now();
    while ((await delivered(database)) < N) await new Promise((resolve) => setTimeout(resolve, 100));
    const seconds = (performance.now() - t0) / 1000;
    for (const child of children) child.kill('SIGTERM');
    await Promise.all(
      children.map(
        (c) => new Promise((resolve) => (c.exitCode !== null ? resolve(null) : c.once('exit', resolve))),
      ),
    );
    children.length = 0;
    const requests = await receiver.stop();
    return { instances, perSecond: N / seconds, seconds, requests, sentTwice: requests - N };
  } finally {
    for (const child of children) child.kill('SIGKILL');
    await database.close();
    const client = new pg.Client({ connectionString: BENCH_DATABASE_URL });
    await client.connect();
    await client.query(`drop schema if exists ${schema} cascade`);
    await client.end();
  }
}

const results = [];
for (const instances of COUNTS) {
  const r = await measure(instances);
  console.log(`${instances} instance(s): ${Math.round(r.perSecond)}/s, sent twice ${r.sentTwice}`);
  results.push(r);
}
const one = results[0]?.perSecond ?? 1;
console.log();
printTable(
  ['instances', 'deliveries/s', 'x one instance', 'seconds', 'requests', 'sent twice'],
  results.map((r) => [
    String(r.instances),
    Math.round(r.perSecond).toLocaleString('en-US'),
    (r.perSecond / one).toFixed(2),
    r.seconds.toFixed(1),
    String(r.requests),
    String(r.sentTwice),
  ]),
);
console.log(`\nwrote ${writeResults('delivery-instances', { deliveries: N, urls: URLS, results })}`);
