// @module-tag postgres
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRateLimiter, RATE_HORIZON_MS } from '../src/endpoints/rate-limit.js';
import {
  createDeliveryClient,
  createDeliveryWorker,
  type Database,
  type DeliveryWorker,
  openDatabase,
} from '../src/index.js';
import { type CountingReceiver, startCountingReceiver } from './fixtures/counting-receiver.js';
import { attemptStarts } from './fixtures/deliveries.js';
import { dropSchema, TEST_DATABASE_URL } from './fixtures/storage.js';

// An endpoint's rate_limit_per_second, held by two delivery workers on one PostgreSQL schema (two
// sender instances): the attempts they start, together, keep the endpoint's spacing. Judged on the
// recorded attempt times with a tolerance, never on how long the run took.

const RATE = 5;
const INTERVAL_MS = 1000 / RATE;
const EVENTS = 12;

describe('rate_limit_per_second across two delivery workers on one PostgreSQL', { timeout: 90_000 }, () => {
  const schema = `payhook_rate_${process.pid}_${Date.now()}`;
  const databases: Database[] = [];
  const workers: DeliveryWorker[] = [];
  const sentBy = [0, 0];
  let receiver: CountingReceiver;

  beforeAll(async () => {
    receiver = await startCountingReceiver({});
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
            sentBy[n] = (sentBy[n] ?? 0) + 1;
            return client.send(request);
          },
          close: () => client.close(),
          destroy: () => client.destroy(),
        },
        pollIntervalMs: 50,
        membership: { heartbeatMs: 100, expireMs: 1000 },
      });
      workers.push(worker);
      await worker.start();
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await Promise.all(databases.map((d) => d.close()));
    await dropSchema(schema);
    receiver?.server.close();
  });

  /** Queues one delivery per event to `url` for `endpointId`; resolves with the delivery ids once all are delivered. */
  async function deliver(url: string, endpointId: string, count: number): Promise<string[]> {
    const db = (databases[0] as Database).db;
    const events = Array.from({ length: count }, () => ({
      id: randomUUID(),
      business_id: 'biz_rate',
      mode: 'test' as const,
      type: 'payment.session.succeeded',
      payment_id: null,
      payload: '{"event":"payment.session.succeeded","data":{},"checksum":"x"}',
    }));
    await db.insertInto('events').values(events).execute();
    const ids = (
      await db
        .insertInto('deliveries')
        .values(events.map((e) => ({ event_id: e.id, url, endpoint_id: endpointId })))
        .returning('id')
        .execute()
    ).map((r) => r.id);
    await sql`select pg_notify('payhook_deliveries', '')`.execute(db);
    await expect
      .poll(
        async () =>
          Number(
            (
              await sql<{ n: string }>`select count(*) as n from deliveries
                where id = any(${ids}::uuid[]) and status = 'delivered'`.execute(db)
            ).rows[0]?.n,
          ),
        { timeout: 60_000, interval: 100 },
      )
      .toBe(count);
    return ids;
  }

  async function endpoint(url: string, rate: number | null): Promise<string> {
    const row = await (databases[0] as Database).db
      .insertInto('webhook_endpoints')
      .values({
        business_id: 'biz_rate',
        mode: 'test',
        url,
        account_secrets: true,
        rate_limit_per_second: rate,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    return row.id;
  }

  it(`starts at most ${RATE} attempts a second to the endpoint, over both workers together`, async () => {
    const url = `${receiver.origin}/limited`;
    const ids = await deliver(url, await endpoint(url, RATE), EVENTS);
    const starts = await attemptStarts(databases[0] as Database, ids);
    expect(starts).toHaveLength(EVENTS);
    // Whichever instance claimed them (one may claim every row ahead), each attempt was sent once.
    expect((sentBy[0] ?? 0) + (sentBy[1] ?? 0)).toBe(EVENTS);
    // Each attempt starts at its send time or after it, never before: send times are one interval apart, so
    // no second holds more than the limit (one more for a start that its process's timer made late,
    // next to an on-time one; two starts may then be close, which is why gaps are not checked).
    for (let i = 0; i < starts.length; i++) {
      const inWindow = starts.filter(
        (t) => t >= (starts[i] as number) && t < (starts[i] as number) + 1000,
      ).length;
      expect(inWindow).toBeLessThanOrEqual(RATE + 1);
    }
    // The last send time is (EVENTS - 1) intervals after the first: the attempts took at least that long,
    // less what a late first start took off (unpaced, all twelve would start within milliseconds).
    expect((starts.at(-1) as number) - (starts[0] as number)).toBeGreaterThanOrEqual(
      (EVENTS - 1) * INTERVAL_MS - 1000,
    );
  });

  it('never gives one send time to two instances: concurrent reservations from both are one interval apart', async () => {
    const id = await endpoint('https://slots.example/', RATE);
    const limiters = databases.map((d) => createRateLimiter(d));
    const at = new Date(Date.now() + 60_000);
    // Twenty reservations at once, half through each instance's own pool, all at the same instant.
    const reservations = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        (limiters[i % 2] as ReturnType<typeof createRateLimiter>).reserve(id, at),
      ),
    );
    const sendTimes = reservations
      .flatMap((p) => (p && 'sendAt' in p ? [p.sendAt.getTime()] : []))
      .sort((a, b) => a - b);
    // The send times within the horizon (1 s: five of them at 5/s), each reserved once, exactly one interval apart.
    expect(sendTimes).toEqual(Array.from({ length: RATE }, (_, i) => at.getTime() + i * INTERVAL_MS));
    // The others are told to come back when a send time may be free, and reserved none.
    const later = reservations.flatMap((p) => (p && 'dueAt' in p ? [p.dueAt.getTime()] : []));
    expect(later).toHaveLength(20 - RATE);
    for (const due of later) expect(due).toBe(at.getTime() + RATE * INTERVAL_MS - RATE_HORIZON_MS);
  });

  it('leaves an endpoint without a limit unpaced: its attempts overlap', async () => {
    const url = `${receiver.origin}/unlimited`;
    const ids = await deliver(url, await endpoint(url, null), 8);
    const starts = await attemptStarts(databases[0] as Database, ids);
    expect(starts).toHaveLength(8);
    // Eight attempts within far less than the seven intervals a limit of 5/s would have needed.
    expect((starts.at(-1) as number) - (starts[0] as number)).toBeLessThan(7 * INTERVAL_MS);
  });
});
