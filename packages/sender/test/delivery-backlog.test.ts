// @module-tag postgres
// @module-tag pglite
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  createDeliveryClient,
  createDeliveryWorker,
  type Database,
  type DeliveryWorker,
} from '../src/index.js';
import { type CountingReceiver, startCountingReceiver } from './fixtures/counting-receiver.js';
import { openTestDatabase, testStorages } from './fixtures/storage.js';

// One URL's backlog: a URL at its limit with many rows due has them paced (moved to their turn)
// rather than read again by every claim. These tests hold the worker to what pacing must not
// change: each row sent once, the limit kept, every row delivered, and the rows of other URLs
// behind the backlog not kept waiting for it.

describe.each(testStorages())("one URL's backlog on %s", { timeout: 60_000 }, (storage) => {
  let database: Database;
  let cleanup: () => Promise<void>;
  let receiver: CountingReceiver;
  const workers: DeliveryWorker[] = [];

  beforeAll(async () => {
    ({ database, cleanup } = await openTestDatabase(storage, 'backlog'));
    receiver = await startCountingReceiver({ '/slow': 15 });
  }, 60_000);
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
    await database.db.deleteFrom('delivery_attempts').execute();
    await database.db.deleteFrom('deliveries').execute();
    receiver.events.clear();
    receiver.most.clear();
  });
  afterAll(async () => {
    receiver?.server.close();
    await cleanup?.();
  });

  /** `n` events with one delivery each to `url`, due `dueAgoMs` ago (the later ones a ms later each). */
  async function queue(url: string, n: number, dueAgoMs: number): Promise<string[]> {
    const events = Array.from({ length: n }, () => ({
      id: randomUUID(),
      business_id: 'biz_backlog',
      mode: 'test' as const,
      type: 'payment.session.succeeded',
      payment_id: null,
      payload: '{"event":"payment.session.succeeded","data":{},"checksum":"x"}',
    }));
    const start = Date.now() - dueAgoMs;
    for (let i = 0; i < n; i += 500) {
      const part = events.slice(i, i + 500);
      await database.db.insertInto('events').values(part).execute();
      await database.db
        .insertInto('deliveries')
        .values(part.map((e, k) => ({ event_id: e.id, url, next_attempt_at: new Date(start + i + k) })))
        .execute();
    }
    return events.map((e) => e.id);
  }

  async function pendingOf(url: string): Promise<number> {
    const { rows } = await sql<{ n: string }>`
      select count(*) as n from deliveries where url = ${url} and status = 'pending'`.execute(database.db);
    return Number(rows[0]?.n);
  }

  function worker(perUrlConcurrency: number): DeliveryWorker {
    const w = createDeliveryWorker({
      database,
      client: createDeliveryClient({ allowPrivate: true }),
      concurrency: 16,
      perUrlConcurrency,
      pollIntervalMs: 50,
    });
    workers.push(w);
    return w;
  }

  /** Every row delivered with one attempt, and each event received exactly once at `url`. */
  async function expectEachOnce(url: string, path: string, ids: string[]) {
    const { rows } = await sql<{ status: string; attempts: number; made: string }>`
      select d.status, d.attempts, (select count(*) from delivery_attempts a where a.delivery_id = d.id) as made
      from deliveries d where d.url = ${url}`.execute(database.db);
    expect(rows).toHaveLength(ids.length);
    expect(rows.filter((r) => r.status !== 'delivered' || r.attempts !== 1 || Number(r.made) !== 1)).toEqual(
      [],
    );
    const got = receiver.events.get(path) ?? [];
    expect(got).toHaveLength(ids.length);
    expect(new Set(got)).toEqual(new Set(ids));
  }

  it('delivers a fast URL backlog longer than it may hold: every row, each once, within its limit', async () => {
    const fast = receiver.url('/fast');
    // PGlite runs in this process, a claim at a time: a shorter backlog says the same there.
    const ids = await queue(fast, storage === 'postgres' ? 1500 : 500, 60_000);
    await worker(2).start();
    await expect.poll(() => pendingOf(fast), { timeout: 45_000, interval: 50 }).toBe(0);
    await expectEachOnce(fast, '/fast', ids);
    expect(receiver.most.get('/fast')).toBeLessThanOrEqual(2);
  });

  it("reaches the rows of other URLs due behind a slow URL's backlog, without waiting for it", async () => {
    const slow = receiver.url('/slow');
    const other = receiver.url('/other');
    // 400 rows of the slow URL (15 ms each, 2 at once: 3 s of work) all due before 20 of another.
    const slowIds = await queue(slow, 400, 120_000);
    const otherIds = await queue(other, 20, 60_000);
    await worker(2).start();
    await expect.poll(() => pendingOf(other), { timeout: 20_000, interval: 20 }).toBe(0);
    // The other URL's rows were not kept behind the backlog: most of it is still to send.
    expect(await pendingOf(slow)).toBeGreaterThan(200);
    await expectEachOnce(other, '/other', otherIds);
    await expect.poll(() => pendingOf(slow), { timeout: 30_000, interval: 50 }).toBe(0);
    await expectEachOnce(slow, '/slow', slowIds);
    expect(receiver.most.get('/slow')).toBeLessThanOrEqual(2);
  });

  it('never moves a backlog that no other URL waits behind', async () => {
    const slow = receiver.url('/slow');
    await queue(slow, 400, 120_000);
    const { rows: before } = await sql<{ id: string; next_attempt_at: Date }>`
      select id, next_attempt_at from deliveries where url = ${slow}`.execute(database.db);
    const due = new Map(before.map((r) => [r.id, r.next_attempt_at.getTime()]));
    await worker(2).start();
    // 40 attempts at 15 ms, 2 at once: several polls (50 ms) while the URL holds all it may.
    await expect
      .poll(async () => 400 - (await pendingOf(slow)), { timeout: 20_000, interval: 20 })
      .toBeGreaterThanOrEqual(40);
    const { rows: waiting } = await sql<{ id: string; next_attempt_at: Date }>`
      select id, next_attempt_at from deliveries
      where url = ${slow} and claim_token is null and attempts = 0`.execute(database.db);
    expect(waiting.length).toBeGreaterThan(200);
    expect(waiting.filter((r) => r.next_attempt_at.getTime() !== due.get(r.id))).toEqual([]);
  });

  it("runDue attempts every row due now, a URL's backlog included, and moves none of them", async () => {
    const fast = receiver.url('/fast');
    const ids = await queue(fast, 300, 60_000);
    const w = worker(1);
    expect(await w.runDue()).toBe(300);
    await expectEachOnce(fast, '/fast', ids);
  });
});
