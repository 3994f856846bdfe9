// @module-tag postgres
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { slotsOf, slotsSql } from '../src/delivery/membership.js';
import {
  createDeliveryClient,
  createDeliveryWorker,
  type Database,
  type DeliveryWorker,
  openDatabase,
} from '../src/index.js';
import { type CountingReceiver, startCountingReceiver } from './fixtures/counting-receiver.js';
import { dropSchema, TEST_DATABASE_URL } from './fixtures/storage.js';

// Two delivery workers on one PostgreSQL schema, each with its own pool, as two sender instances:
// a slow URL's limit holds across them, each URL's slots are shared out, and one takes the
// other's slots when it stops. The slot arithmetic is the same in the claim's SQL and in the worker.

const PER_URL = 4;
const SLOW_MS = 150;

describe('the per-URL limit across two delivery workers on one PostgreSQL', { timeout: 60_000 }, () => {
  const schema = `payhook_instances_${process.pid}_${Date.now()}`;
  const databases: Database[] = [];
  const workers: DeliveryWorker[] = [];
  /** The URLs each worker sent to. */
  const sentBy = [new Set<string>(), new Set<string>()];
  let receiver: CountingReceiver;

  beforeAll(async () => {
    receiver = await startCountingReceiver({ '/slow': SLOW_MS });
    for (const n of [0, 1]) {
      const database = await openDatabase({ url: TEST_DATABASE_URL, schema }).catch((error: Error) => {
        throw new Error(`Cannot use the test PostgreSQL at ${TEST_DATABASE_URL}: ${error.message}.`);
      });
      databases.push(database);
      const client = createDeliveryClient({ allowPrivate: true });
      const worker = createDeliveryWorker({
        database,
        client: {
          send: (request) => {
            sentBy[n]?.add(request.url);
            return client.send(request);
          },
          close: () => client.close(),
          destroy: () => client.destroy(),
        },
        perUrlConcurrency: PER_URL,
        pollIntervalMs: 50,
        membership: { heartbeatMs: 100, expireMs: 1000 },
      });
      workers.push(worker);
      await worker.start();
    }
    // Both have seen each other once a heartbeat has passed after the second joined.
    await new Promise((resolve) => setTimeout(resolve, 300));
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await Promise.all(databases.map((d) => d.close()));
    await dropSchema(schema);
    receiver?.server.close();
  });

  /** Queues one event per URL given, with one delivery each; resolves when all are delivered. */
  async function deliver(urls: string[]): Promise<void> {
    const db = (databases[0] as Database).db;
    const events = urls.map(() => ({
      id: randomUUID(),
      business_id: 'biz_instances',
      mode: 'test' as const,
      type: 'payment.session.succeeded',
      payment_id: null,
      payload: '{"event":"payment.session.succeeded","data":{},"checksum":"x"}',
    }));
    await db.insertInto('events').values(events).execute();
    const ids = await db
      .insertInto('deliveries')
      .values(events.map((e, i) => ({ event_id: e.id, url: urls[i] as string })))
      .returning('id')
      .execute();
    await expect
      .poll(
        async () =>
          Number(
            (
              await sql<{ n: string }>`select count(*) as n from deliveries
                where id = any(${ids.map((r) => r.id)}::uuid[]) and status = 'delivered'`.execute(db)
            ).rows[0]?.n,
          ),
        { timeout: 30_000, interval: 50 },
      )
      .toBe(urls.length);
  }

  it('keeps a slow URL at its limit across both, each sending with its share of the slots', async () => {
    const rows = await sql<{ n: string }>`select count(*) as n from delivery_instances`.execute(
      (databases[0] as Database).db,
    );
    expect(Number(rows.rows[0]?.n)).toBe(2);
    const slow = `${receiver.origin}/slow`;
    const fast = Array.from({ length: 16 }, (_, i) => `${receiver.origin}/fast/${i}`);
    await deliver([...Array(40).fill(slow), ...fast, ...fast]);
    // Two workers holding four each would have sent eight at once; here each has two of the four.
    expect(receiver.most.get('/slow')).toBe(PER_URL);
    const [a, b] = sentBy as [Set<string>, Set<string>];
    expect(a.has(slow) && b.has(slow)).toBe(true);
    expect(new Set([...a, ...b]).size).toBe(17);
  });

  it('gives a stopped worker’s slots to the one left, which then sends to every URL with all four', async () => {
    await (workers[0] as DeliveryWorker).stop();
    for (const set of sentBy) set.clear();
    const fast = Array.from({ length: 16 }, (_, i) => `${receiver.origin}/fast/${i}`);
    await deliver([...Array(12).fill(`${receiver.origin}/slow`), ...fast]);
    expect(sentBy[0]?.size).toBe(0);
    expect(sentBy[1]?.size).toBe(17);
    expect(receiver.most.get('/slow')).toBe(PER_URL);
  });
});

describe('the slots of a URL', () => {
  it("are all one instance's while alone, and split among several without loss or overlap", () => {
    const urls = Array.from({ length: 500 }, (_, i) => `https://merchant-${i}.example/webhooks`);
    for (const url of urls) expect(slotsOf(url, 4, undefined)).toBe(4);
    for (const count of [2, 3, 4, 5, 9]) {
      for (const url of urls) {
        const slots = Array.from({ length: count }, (_, rank) => slotsOf(url, 4, { count, rank }));
        expect(slots.reduce((a, b) => a + b, 0)).toBe(4);
        expect(Math.max(...slots) - Math.min(...slots)).toBeLessThanOrEqual(1);
      }
    }
  });

  it('are computed alike by the claim statement in PostgreSQL', { timeout: 30_000 }, async () => {
    const slotsSchema = `payhook_slots_${process.pid}_${Date.now()}`;
    const database = await openDatabase({ url: TEST_DATABASE_URL, schema: slotsSchema });
    try {
      const urls = Array.from({ length: 300 }, (_, i) => `https://m${i}.example/hooks?x=${i * 7919}`);
      for (const share of [
        { count: 2, rank: 1 },
        { count: 3, rank: 0 },
        { count: 5, rank: 4 },
      ]) {
        const { rows } = await sql<{ url: string; slots: number }>`
          select url, ${slotsSql(4, share)} as slots from unnest(${urls}::text[]) as u(url)`.execute(
          database.db,
        );
        expect(rows.map((r) => r.slots)).toEqual(urls.map((url) => slotsOf(url, 4, share)));
      }
    } finally {
      await database.close();
      await dropSchema(slotsSchema);
    }
  });
});
