/**
 * pnpm bench:stores — events per second through receiver processes, and the acknowledgement latency
 * (p50/p99) at a steady BENCH_STORES_RATE events a second (default 500), with the PostgreSQL store
 * beside the Redis store, on 1 and 3 instances. In both cases the handler writes one row to
 * PostgreSQL: through the attempt's transaction with the PostgreSQL store (committed with the done
 * mark), with the merchant's own pool (autocommit) with the Redis store. Targets: the PostgreSQL
 * store at 0.7x the Redis store's events/s or more, and an acknowledgement p99 of 10 ms or less at
 * 500 events/s.
 *
 * Method: the load goes through node:http's keep-alive connections (bench/lib.ts, `postText`);
 * each instance is a receiver process over node:http (packages/postgres/test/fixtures/
 * crash-receiver.ts, told to die nowhere, on the built packages), concurrency 16, a pool of 20; the stores on the shared
 * test servers (TEST_DATABASE_URL, TEST_REDIS_URL) under a fresh schema and key prefix, dropped
 * afterwards. Events/s: BENCH_STORES_EVENTS distinct signed events (default 3,000), 64 requests at
 * once spread over the instances, from the first request until every event's row is in the
 * merchant's table, each receiver's queue bound (`maxQueuedEvents`) above the run's events, so that
 * the load measures the store and the handler, not refusals sent again every few milliseconds
 * (with the default bound of 1,000 the 64 requests filled it, and each event was refused 4 to 7
 * times before its 200: the receivers' CPU went to verifying copies that a sender would have sent
 * again after `Retry-After`); any answer other than 200 is counted and sent again after 5 ms; with the CPU each event cost the receivers, PostgreSQL and Redis (from /proc,
 * on Linux), steadier than events/s when other work shares the machine. Latency: an open loop at the rate for BENCH_STORES_SECONDS (default 4), each
 * request's time to its 200, new events each, spread over the instances. BENCH_STORES_INSTANCES
 * picks the instance counts (default 1,3). A last row runs the PostgreSQL store on one instance
 * again with an inbox of a busy merchant's past: BENCH_STORES_HISTORY records (default 2,000,000,
 * 2 % of them past their retention for the purge) and half as many payments' order records, to
 * set beside the empty inbox's row (0 skips it).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { Agent } from 'node:http';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { createTestEvent } from '@payhook/core/testing';
import { Redis } from 'ioredis';
import pg from 'pg';
import {
  BENCH_BUSINESS_ID,
  BENCH_DATABASE_URL,
  cpuOfPids,
  cpuOfProcesses,
  cpuSince,
  postText,
  printTable,
  quantile,
  sleep,
  writeResults,
} from './lib.js';

const EVENTS = Number(process.env.BENCH_STORES_EVENTS ?? 3000);
const RATE = Number(process.env.BENCH_STORES_RATE ?? 500);
const SECONDS = Number(process.env.BENCH_STORES_SECONDS ?? 4);
const INSTANCES = (process.env.BENCH_STORES_INSTANCES ?? '1,3').split(',').map(Number);
/** Records in the PostgreSQL inbox (and half as many payments in its objects table) for the history row; 0 for none. */
const HISTORY = Number(process.env.BENCH_STORES_HISTORY ?? 2_000_000);
const IN_FLIGHT = 64;
const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const receiverScript = fileURLToPath(
  new URL('../packages/postgres/test/fixtures/crash-receiver.ts', import.meta.url),
);
const root = fileURLToPath(new URL('../', import.meta.url));

type Store = 'postgres' | 'redis';

interface Row {
  store: Store;
  instances: number;
  /** Records the inbox held before the run (0 but for the history row). */
  history: number;
  eventsPerSecond: number;
  ackP50Ms: number;
  ackP99Ms: number;
  /** Requests of the latency run answered other than 200. */
  ackErrors: number;
  /** Requests of the events/s run answered other than 200 (and sent again). */
  refused: number;
  /** CPU per event of the events/s run, in µs: the receiver processes, PostgreSQL's, Redis's. */
  receiversCpuUs?: number;
  postgresCpuUs?: number;
  redisCpuUs?: number;
}

/** Each receiver's bound on acknowledged, unfinished events: above the run's (see the method). */
const MAX_QUEUED_EVENTS = String(EVENTS + 1000);

async function startInstance(env: Record<string, string>): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', receiverScript], {
    cwd: root,
    // The receiver runs the packages as built (their dist, what the packed tarballs hold): the base
    // tsconfig maps no package name to its sources, so imports resolve through each package.json.
    env: {
      ...process.env,
      ...env,
      PORT: '0',
      CONCURRENCY: '16',
      MAX_QUEUED_EVENTS,
      TSX_TSCONFIG_PATH: 'tsconfig.base.json',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [line] = (await once(createInterface({ input: child.stdout as NodeJS.ReadableStream }), 'line')) as [
    string,
  ];
  return { child, url: `http://127.0.0.1:${line.split(' ')[1]}/webhooks` };
}

const bodies = (n: number) =>
  Array.from({ length: n }, () =>
    JSON.stringify(createTestEvent('payment.session.succeeded', BENCH_BUSINESS_ID)),
  );

/** The load's keep-alive connections (see `postText`). */
const agent = new Agent({ keepAlive: true, maxSockets: 256 });

async function post(url: string, body: string): Promise<number> {
  return (await postText(url, { 'content-type': 'application/json' }, body, agent)).status;
}

/**
 * A provider-sized past in the inbox at `schema`: `n` events done (2 % of them past their retention,
 * for the purge to find), with keys spread as checksums are, and half as many payments' order
 * records; vacuumed and analyzed, as autovacuum leaves an old table.
 */
async function seedHistory(pool: pg.Pool, schema: string, n: number): Promise<void> {
  const now = '(extract(epoch from clock_timestamp()) * 1000)::bigint';
  const day = 86_400_000;
  await pool.query(
    `INSERT INTO "${schema}".inbox (key, state, attempts, business_id, received_at, updated_at, expires_at, last_claim)
     SELECT $1 || ':' || encode(sha256(('history-' || i)::bytea), 'hex'), 'done', 1, $1,
            t.ms - 7 * ${day} + i, t.ms - 7 * ${day} + i,
            CASE WHEN i % 50 = 0 THEN t.ms - ${day} ELSE t.ms + 7 * ${day} - (i % ${day}) END, 'new'
     FROM generate_series(1, $2::int) AS i, (SELECT ${now} AS ms) AS t`,
    [BENCH_BUSINESS_ID, n],
  );
  await pool.query(
    `INSERT INTO "${schema}".inbox_objects (id, rank, holder, updated_at, expires_at)
     SELECT $1 || E'\n' || md5('payment-' || i)::uuid, 3, NULL, t.ms, t.ms + 7 * ${day}
     FROM generate_series(1, $2::int) AS i, (SELECT ${now} AS ms) AS t`,
    [BENCH_BUSINESS_ID, Math.floor(n / 2)],
  );
  await pool.query(`VACUUM ANALYZE "${schema}".inbox`);
  await pool.query(`VACUUM ANALYZE "${schema}".inbox_objects`);
}

async function measure(pool: pg.Pool, store: Store, instances: number, history = 0): Promise<Row> {
  const schema = `payhook_bench_${Math.random().toString(36).slice(2, 10)}`;
  const prefix = `payhook-bench:${schema}`;
  await pool.query(`CREATE SCHEMA "${schema}"`);
  await pool.query(
    `CREATE TABLE "${schema}".effects (id bigserial PRIMARY KEY, event_key text NOT NULL, pid int)`,
  );
  const running = await Promise.all(
    Array.from({ length: instances }, () =>
      startInstance({
        STORE: store,
        DATABASE_URL: BENCH_DATABASE_URL,
        SCHEMA: schema,
        REDIS_URL,
        PREFIX: prefix,
        BUSINESS_ID: BENCH_BUSINESS_ID,
      }),
    ),
  );
  const urls = running.map((r) => r.url);
  const rowsWritten = async () =>
    ((await pool.query(`SELECT count(*)::int AS n FROM "${schema}".effects`)).rows[0] as { n: number }).n;
  try {
    // Warm-up: connections, the inbox's creation, the JIT.
    const warm = bodies(200);
    await Promise.all(warm.map((body, i) => post(urls[i % urls.length] as string, body)));
    while ((await rowsWritten()) < warm.length) await sleep(20);
    if (history > 0) await seedHistory(pool, schema, history);

    // Events/s, closed loop: from the first request until every row is written.
    const sent = bodies(EVENTS);
    let next = 0;
    let refused = 0;
    const pids = running.map(({ child }) => child.pid as number);
    // Every run starts just after a checkpoint, so that each pays the same full-page writes.
    await pool.query('CHECKPOINT');
    const receivers0 = cpuOfPids(pids);
    const postgres0 = cpuOfProcesses('postgres');
    const redis0 = cpuOfProcesses('redis-server');
    const started = performance.now();
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (next < sent.length) {
          const i = next++;
          while ((await post(urls[i % urls.length] as string, sent[i] as string)) !== 200) {
            refused++;
            await sleep(5);
          }
        }
      }),
    );
    while ((await rowsWritten()) < warm.length + EVENTS) await sleep(5);
    const eventsPerSecond = EVENTS / ((performance.now() - started) / 1000);
    const perEvent = (us: number | undefined) => (us === undefined ? undefined : Math.round(us / EVENTS));
    const receiversNow = cpuOfPids(pids);
    const receiversCpuUs = perEvent(
      receiversNow === undefined || receivers0 === undefined ? undefined : receiversNow - receivers0,
    );
    const postgresCpuUs = perEvent(cpuSince(postgres0, cpuOfProcesses('postgres')));
    const redisCpuUs = perEvent(cpuSince(redis0, cpuOfProcesses('redis-server')));

    // Acknowledgement latency, open loop at RATE.
    const steady = bodies(RATE * SECONDS);
    const latencies: number[] = [];
    let ackErrors = 0;
    const requests: Promise<void>[] = [];
    const begin = performance.now();
    for (let i = 0; i < steady.length; i++) {
      const due = begin + (i * 1000) / RATE;
      const wait = due - performance.now();
      if (wait > 1) await sleep(wait);
      const at = performance.now();
      requests.push(
        post(urls[i % urls.length] as string, steady[i] as string).then(
          (status) => {
            if (status === 200) latencies.push(performance.now() - at);
            else ackErrors++;
          },
          () => {
            ackErrors++;
          },
        ),
      );
    }
    await Promise.all(requests);
    latencies.sort((a, b) => a - b);
    return {
      store,
      instances,
      history,
      eventsPerSecond: Math.round(eventsPerSecond),
      ackP50Ms: Number(quantile(latencies, 0.5).toFixed(2)),
      ackP99Ms: Number(quantile(latencies, 0.99).toFixed(2)),
      ackErrors,
      refused,
      receiversCpuUs,
      postgresCpuUs,
      redisCpuUs,
    };
  } finally {
    for (const { child } of running) {
      child.kill('SIGKILL');
      await once(child, 'exit');
    }
    await pool.query(`DROP SCHEMA "${schema}" CASCADE`);
    if (store === 'redis') {
      const redis = new Redis(REDIS_URL);
      const keys = await redis.keys(`*${prefix}*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    }
  }
}

const pool = new pg.Pool({ connectionString: BENCH_DATABASE_URL, max: 2 });
const rows: Row[] = [];
try {
  for (const instances of INSTANCES) {
    for (const store of ['redis', 'postgres'] as const) {
      const row = await measure(pool, store, instances);
      rows.push(row);
      console.log(
        `${store}, ${instances} instance(s): ${row.eventsPerSecond} events/s, ack p99 ${row.ackP99Ms} ms`,
      );
    }
  }
  if (HISTORY > 0) {
    const row = await measure(pool, 'postgres', 1, HISTORY);
    rows.push(row);
    console.log(
      `postgres, 1 instance, ${HISTORY} records before: ${row.eventsPerSecond} events/s, ack p99 ${row.ackP99Ms} ms`,
    );
  }
} finally {
  agent.destroy();
  await pool.end();
}

const results: Record<string, unknown> = { events: EVENTS, rate: RATE, seconds: SECONDS };
const redisOf = (row: Row) => rows.find((r) => r.store === 'redis' && r.instances === row.instances) as Row;
for (const row of rows) {
  const redis = redisOf(row);
  results[`${row.store}, ${row.instances}${row.history > 0 ? ', history' : ''}`] = {
    ...row,
    xRedis: Number((row.eventsPerSecond / redis.eventsPerSecond).toFixed(2)),
  };
}
printTable(
  [
    'store',
    'instances',
    'records before',
    'events/s',
    'x Redis',
    `ack p50 at ${RATE}/s, ms`,
    'ack p99, ms',
    'errors',
    'refused',
  ],
  rows.map((row) => {
    const redis = redisOf(row);
    return [
      row.store,
      String(row.instances),
      String(row.history),
      String(row.eventsPerSecond),
      (row.eventsPerSecond / redis.eventsPerSecond).toFixed(2),
      row.ackP50Ms.toFixed(2),
      row.ackP99Ms.toFixed(2),
      String(row.ackErrors),
      String(row.refused),
      [row.receiversCpuUs, row.postgresCpuUs, row.redisCpuUs].map((us) => us ?? '-').join(', '),
    ];
  }),
);
console.log(`results: ${writeResults('stores', results)}`);
