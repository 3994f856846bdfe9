// @module-tag postgres
// @module-tag pglite
import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type LoopbackReceiver, startLoopbackReceiver } from '../../../test/support/loopback-receiver.js';
import { createMaintenance, type MaintenanceReport } from '../src/db/maintenance.js';
import {
  createDeliveryClient,
  createDeliveryWorker,
  type Database,
  loadConfig,
  type Schema,
  startSender,
} from '../src/index.js';
import { holdingStatements } from './fixtures/held-statement.js';
import { openTestDatabase } from './fixtures/storage.js';

const BATCH = 2000;

interface Counters {
  dead: number;
  vacuums: number;
  analyzes: number;
  autovacuums: number;
}

/** A table's counters, with this backend's pending ones flushed first (PGlite is one backend). */
async function counters(database: Database, table: keyof Schema): Promise<Counters> {
  await sql`select pg_stat_force_next_flush()`.execute(database.db);
  const { rows } = await sql<Counters>`
    select n_dead_tup::int as dead, vacuum_count::int as vacuums, analyze_count::int as analyzes,
           autovacuum_count::int as autovacuums
    from pg_stat_user_tables where relname = ${table}`.execute(database.db);
  return rows[0] as Counters;
}

/** Queues `n` events with one delivery each to `url`, due now. */
async function queue(database: Database, url: string, n: number): Promise<void> {
  await sql`
    with e as (
      insert into events (id, business_id, mode, type, payload)
      select gen_random_uuid(), 'biz-maintenance', 'test', 'payment.session.succeeded', '{"event":"x"}'
      from generate_series(1, ${n}::int)
      returning id
    )
    insert into deliveries (event_id, url) select id, ${url} from e`.execute(database.db);
}

/** Delivers everything due with the real worker; returns the attempts made. */
async function deliverAll(database: Database): Promise<number> {
  const worker = createDeliveryWorker({
    database,
    client: createDeliveryClient({ allowPrivate: true }),
    concurrency: 32,
    perUrlConcurrency: 32,
  });
  try {
    return await worker.runDue();
  } finally {
    await worker.stop();
  }
}

async function delivered(database: Database): Promise<number> {
  const row = await database.db
    .selectFrom('deliveries')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('status', '=', 'delivered')
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** Settles what is queued now: every pending microtask and the I/O callbacks already due. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('database maintenance on PGlite', { timeout: 120_000 }, () => {
  let database: Database;
  let cleanup: () => Promise<void>;
  let receiver: LoopbackReceiver;

  beforeAll(async () => {
    ({ database, cleanup } = await openTestDatabase('pglite', 'maintenance'));
    receiver = await startLoopbackReceiver({ respond: 200 });
  }, 60_000);
  afterAll(async () => {
    await receiver?.close();
    await cleanup?.();
  });

  it('vacuums the tables that delivering left dead rows in, which nothing else does, and the worker still delivers', async () => {
    await queue(database, receiver.url, BATCH);
    expect(await deliverAll(database)).toBe(BATCH);
    // A claim and an attempt record per delivery: two dead row versions each. No autovacuum.
    const before = await counters(database, 'deliveries');
    expect(before.dead).toBeGreaterThanOrEqual(2 * BATCH);
    expect(before).toMatchObject({ vacuums: 0, analyzes: 0, autovacuums: 0 });

    const report = await createMaintenance({ database, intervalMs: 0 }).run();
    const done = report.tables.map((t) => `${t.action} ${t.table}`);
    // The updated queue first, and the tables only inserted into (their visibility map is set).
    expect(done.slice(0, 2)).toEqual(['vacuum deliveries', 'analyze deliveries']);
    expect(done).toEqual(
      expect.arrayContaining(['vacuum events', 'analyze events', 'vacuum delivery_attempts']),
    );
    const after = await counters(database, 'deliveries');
    expect(after).toMatchObject({ dead: 0, vacuums: 1, analyzes: 1 });

    // Below the thresholds again: a second pass leaves the tables alone.
    expect((await createMaintenance({ database, intervalMs: 0 }).run()).tables).toEqual([]);

    await queue(database, receiver.url, BATCH);
    expect(await deliverAll(database)).toBe(BATCH);
    expect(await delivered(database)).toBe(2 * BATCH);
  });

  it('runs by itself every interval once started, until stopped', async () => {
    await queue(database, receiver.url, BATCH);
    expect(await deliverAll(database)).toBe(BATCH);
    const { vacuums } = await counters(database, 'deliveries');
    const maintenance = createMaintenance({ database, intervalMs: 20 });
    maintenance.start();
    try {
      await vi.waitFor(
        async () => expect((await counters(database, 'deliveries')).vacuums).toBe(vacuums + 1),
        {
          timeout: 60_000,
          interval: 50,
        },
      );
    } finally {
      await maintenance.stop();
    }
    expect((await counters(database, 'deliveries')).dead).toBe(0);
  });

  it("a periodic pass rests nine times a statement's time after it before the next, and none runs after stop()", async () => {
    await queue(database, receiver.url, BATCH);
    expect(await deliverAll(database)).toBe(BATCH);
    // Each statement's end on this clock, and the time it held the database.
    const ends: { at: number; ms: number }[] = [];
    let twoDone!: () => void;
    const two = new Promise<void>((resolve) => {
      twoDone = resolve;
    });
    const logger = {
      info(entry: object, msg?: string) {
        if (msg !== 'database maintenance') return;
        ends.push({ at: performance.now(), ms: (entry as { ms: number }).ms });
        if (ends.length === 2) twoDone();
      },
      warn() {},
      error() {},
    };
    const maintenance = createMaintenance({ database, intervalMs: 20, logger });
    maintenance.start();
    let before: number;
    try {
      await two;
      const [first, second] = ends as [{ at: number; ms: number }, { at: number; ms: number }];
      // The second statement began no sooner than 9 x the first's time after the first ended (the
      // logged times are rounded: 0.5 ms each way).
      expect(second.at - first.at - second.ms + 0.5).toBeGreaterThanOrEqual(9 * (first.ms - 0.5));
    } finally {
      // Stopped during the rest after the second statement: no third statement, then or later.
      before = ends.length;
      await maintenance.stop();
    }
    expect(ends.length).toBe(before);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(ends.length).toBe(before);
  });

  it('a periodic pass stopped during a statement ends after it, without its rest', async () => {
    await queue(database, receiver.url, BATCH);
    expect(await deliverAll(database)).toBe(BATCH);
    const held = holdingStatements(database, (text) => text.startsWith('vacuum'));
    const maintenance = createMaintenance({ database: held.database, intervalMs: 20 });
    maintenance.start();
    await held.reached;
    const stopped = maintenance.stop().then(() => 'stopped' as const);
    // A guard on the real clock; from here on a rest's timer never fires, so a pass that rested
    // after the held VACUUM would never end, and neither would stop().
    const guard = new Promise<'rested'>((resolve) => setTimeout(resolve, 10_000, 'rested'));
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      held.release();
      expect(await Promise.race([stopped, guard])).toBe('stopped');
    } finally {
      vi.useRealTimers();
    }
  });

  it('deletes idempotency keys past twice their 24 hours, and keeps the others', async () => {
    const day = 24 * 3600_000;
    const at = new Date('2030-01-10T00:00:00Z');
    const keys = [
      { key: 'old', created_at: new Date(at.getTime() - 3 * day) },
      { key: 'expired-recently', created_at: new Date(at.getTime() - 1.5 * day) },
      { key: 'live', created_at: new Date(at.getTime() - 3600_000) },
    ];
    await database.db
      .insertInto('idempotency_keys')
      .values(
        keys.map((k) => ({ business_id: 'biz-maintenance', mode: 'test' as const, request_hash: 'h', ...k })),
      )
      .execute();
    const maintenance = createMaintenance({ database, intervalMs: 0, now: () => at });
    expect((await maintenance.run()).pruned).toBe(1);
    // Once an hour at most: the next pass does not scan the table again.
    expect((await maintenance.run()).pruned).toBe(0);
    const left = await database.db.selectFrom('idempotency_keys').select('key').orderBy('key').execute();
    expect(left.map((r) => r.key)).toEqual(['expired-recently', 'live']);
  });

  it('stop() waits for the VACUUM that is running, and starts no other', async () => {
    await queue(database, receiver.url, BATCH);
    expect(await deliverAll(database)).toBe(BATCH);
    const held = holdingStatements(database, (text) => text.startsWith('vacuum'));
    const maintenance = createMaintenance({ database: held.database, intervalMs: 0 });
    const order: string[] = [];
    const pass = maintenance.run().then((report) => {
      order.push('pass');
      return report;
    });
    await held.reached;
    const stopped = maintenance.stop().then(() => order.push('stopped'));
    await settle();
    expect(order).toEqual([]);
    held.release();
    await stopped;
    expect(order).toEqual(['pass', 'stopped']);
    // Several tables were due; the stop came during the first.
    const report: MaintenanceReport = await pass;
    expect(report.tables.map((t) => t.table)).toEqual(['deliveries']);
    expect(await maintenance.run()).toEqual({ tables: [], pruned: 0 });
  });

  it("the service's close() waits for a running maintenance pass", async () => {
    await queue(database, receiver.url, BATCH);
    expect(await deliverAll(database)).toBe(BATCH);
    const held = holdingStatements(database, (text) => text.startsWith('vacuum'));
    const service = await startSender({
      config: loadConfig({ PORT: '0', PAYHOOK_MAINTENANCE_INTERVAL_SECONDS: '0' }),
      database: held.database,
      logger: false,
      // No poll while the VACUUM is held: a claim queued behind it would hold up the worker's stop.
      worker: { pollIntervalMs: 3_600_000 },
    });
    const order: string[] = [];
    const pass = service.maintenance.run().then(() => order.push('pass'));
    await held.reached;
    // Everything else close() waits for is done once the worker has stopped.
    let workerStopped!: () => void;
    const stoppedWorker = new Promise<void>((resolve) => {
      workerStopped = resolve;
    });
    const stopWorker = service.worker.stop.bind(service.worker);
    service.worker.stop = async () => {
      await stopWorker();
      workerStopped();
    };
    const closed = service.close().then(() => order.push('closed'));
    await stoppedWorker;
    await settle();
    expect(order).toEqual([]);
    held.release();
    await closed;
    await pass;
    expect(order).toEqual(['pass', 'closed']);
  });
});

describe('database maintenance on PostgreSQL', { timeout: 60_000 }, () => {
  it('does nothing: the server vacuums by itself', async () => {
    const { database, cleanup } = await openTestDatabase('postgres', 'maintenance');
    try {
      await queue(database, 'http://127.0.0.1:9/webhooks/', 100);
      await sql`update deliveries set attempts = attempts + 1`.execute(database.db);
      await database.db
        .insertInto('idempotency_keys')
        .values({ business_id: 'b', mode: 'test', key: 'k', request_hash: 'h', created_at: new Date(0) })
        .execute();
      const maintenance = createMaintenance({ database, intervalMs: 10 });
      maintenance.start();
      expect(await maintenance.run()).toEqual({ tables: [], pruned: 0 });
      await maintenance.stop();
    } finally {
      await cleanup();
    }
  });
});
