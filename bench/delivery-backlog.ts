/**
 * pnpm bench:delivery-backlog — the delivery worker with a long backlog for one URL, at the default
 * limits (32 attempts in flight, 4 per URL), on PostgreSQL: what docs/decisions.md ("Per-URL
 * concurrency") reports.
 *
 * - one URL: BENCH_BACKLOG deliveries (default 20,000) queued for one fast local URL. The worker
 *   can only have 4 of them in flight; the figure is what it costs to keep those 4 busy.
 * - slow URL ahead: a fifth as many queued for a URL that answers after 50 ms, due first, then
 *   BENCH_BACKLOG for ten fast URLs; the figure is the fast URLs' deliveries, made while the slow
 *   one holds all it may.
 *
 * Method: the receiver is a node:http server on 127.0.0.1 in a child process
 * (delivery-fixtures.ts); paths under /slow answer after 50 ms, the others at once. Each scenario
 * runs in a schema of its own (dropped at the end): the rows are inserted in bulk, one event each
 * (a signed ~1 KB payment payload), then `createDeliveryWorker` with `createDeliveryClient({
 * allowPrivate: true })` and the default limits is started and the table polled every 100 ms until
 * every fast delivery is delivered. Reported: fast deliveries per second, and the CPU time per fast
 * delivery of this process (the worker) and, on Linux with PostgreSQL on this machine, of the
 * server's processes (from /proc). No targets: the figures are reported.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { createDeliveryClient, createDeliveryWorker, openDatabase } from '@payhook/sender';
import { sql } from 'kysely';
import { queueDeliveries, SLOW_MS, startReceiver } from './delivery-fixtures.js';
import { BENCH_DATABASE_URL, ownCpu, postgresCpu, printTable, writeResults } from './lib.js';

const BACKLOG = Number(process.env.BENCH_BACKLOG ?? 20_000);

interface Row {
  scenario: string;
  delivered: number;
  perSecond: number;
  cpuUs: number;
  postgresCpuUs?: number;
}

async function scenario(name: string, origin: string, slow: number, fastUrls: number): Promise<Row> {
  const schema = `payhook_bench_${randomBytes(4).toString('hex')}`;
  const database = await openDatabase({ url: BENCH_DATABASE_URL, schema });
  try {
    const fast = Array.from({ length: fastUrls }, (_, i) => `${origin}/fast/${i}`);
    const start = Date.now();
    if (slow > 0) await queueDeliveries(database, [`${origin}/slow`], slow, new Date(start - 120_000));
    await queueDeliveries(database, fast, BACKLOG, new Date(start - 60_000));
    await sql`analyze deliveries`.execute(database.db);
    const client = createDeliveryClient({ allowPrivate: true });
    const worker = createDeliveryWorker({ database, client, pollIntervalMs: 100 });
    const cpu0 = ownCpu();
    const pg0 = postgresCpu();
    const t0 = performance.now();
    await worker.start();
    let delivered = 0;
    while (delivered < BACKLOG) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      const row = await database.db
        .selectFrom('deliveries')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('status', '=', 'delivered')
        .where('url', 'in', fast)
        .executeTakeFirstOrThrow();
      delivered = Number(row.n);
    }
    const seconds = (performance.now() - t0) / 1000;
    const cpuUs = (ownCpu() - cpu0) / delivered;
    const pg1 = postgresCpu();
    await worker.stop();
    await client.destroy();
    return {
      scenario: name,
      delivered,
      perSecond: delivered / seconds,
      cpuUs,
      ...(pg0 !== undefined && pg1 !== undefined ? { postgresCpuUs: (pg1 - pg0) / delivered } : {}),
    };
  } finally {
    await sql`drop schema if exists ${sql.id(schema)} cascade`.execute(database.db);
    await database.close();
  }
}

async function main(): Promise<void> {
  console.log(
    `${BACKLOG.toLocaleString('en-US')} deliveries queued for fast URLs, worker at its default limits ` +
      '(32 in flight, 4 per URL), PostgreSQL\n',
  );
  const receiver = await startReceiver();
  try {
    const rows = [
      await scenario('one URL', receiver.origin, 0, 1),
      await scenario(
        `slow URL ahead (${BACKLOG / 5} at ${SLOW_MS} ms), ten fast URLs`,
        receiver.origin,
        BACKLOG / 5,
        10,
      ),
    ];
    const us = (x: number | undefined) => (x === undefined ? 'n/a' : `${Math.round(x)} µs`);
    printTable(
      ['scenario', 'fast deliveries/s', 'CPU/delivery', 'PostgreSQL CPU/delivery'],
      rows.map((r) => [
        r.scenario,
        Math.round(r.perSecond).toLocaleString('en-US'),
        us(r.cpuUs),
        us(r.postgresCpuUs),
      ]),
    );
    console.log(`\nresults written to ${writeResults('delivery-backlog', rows).replace(process.cwd(), '.')}`);
  } finally {
    await receiver.stop();
  }
}

await main();
