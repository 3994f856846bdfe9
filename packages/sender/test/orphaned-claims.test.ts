// @module-tag postgres
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FaultProxy, startProxy } from '../../../test/support/fault-proxy.js';
import {
  createDeliveryClient,
  createDeliveryWorker,
  type Database,
  type DeliveryWorker,
  openDatabase,
} from '../src/index.js';
import { type CountingReceiver, startCountingReceiver } from './fixtures/counting-receiver.js';
import { dropSchema, TEST_DATABASE_URL } from './fixtures/storage.js';

// A claim whose answer is lost commits on the server all the same: its rows are claimed by a
// worker that never heard of them. With the database up throughout (new connections work, so its
// health never goes down and comes back), those rows must not wait for their lease to end (a
// minute): the worker gives back what it claimed and does not hold, within seconds of the failure.

const ROWS = 5;

describe('a claim that committed after the worker gave it up', { timeout: 90_000 }, () => {
  const schema = `payhook_orphans_${process.pid}_${Date.now()}`;
  let proxy: FaultProxy;
  let direct: Database;
  let remote: Database;
  let worker: DeliveryWorker;
  let receiver: CountingReceiver;

  beforeAll(async () => {
    receiver = await startCountingReceiver({});
    direct = await openDatabase({ url: TEST_DATABASE_URL, schema }).catch((error: Error) => {
      throw new Error(`Cannot use the test PostgreSQL at ${TEST_DATABASE_URL}: ${error.message}.`);
    });
    const server = new URL(TEST_DATABASE_URL);
    proxy = await startProxy({ host: server.hostname, port: Number(server.port || 5432) }, 'postgres');
    const through = new URL(TEST_DATABASE_URL);
    through.host = `127.0.0.1:${proxy.port}`;
    remote = await openDatabase({ url: through.toString(), schema, statementTimeoutMs: 500 });
  }, 60_000);
  afterAll(async () => {
    await worker?.stop();
    await remote?.close();
    await direct?.close();
    await proxy?.close();
    await dropSchema(schema);
    receiver?.server.close();
  });

  it('gives the rows back within seconds, not at the end of their 60 s lease, and sends each once', async () => {
    const url = `${receiver.origin}/orphans`;
    worker = createDeliveryWorker({
      database: remote,
      client: createDeliveryClient({ allowPrivate: true }),
      leaseMs: 60_000,
      // No poll: only the wake-up below, and what the worker does after the failure, claim.
      pollIntervalMs: 600_000,
    });
    await worker.start();
    // The worker's connections are open (its first claims ran); from now on their answers are lost.
    await new Promise((resolve) => setTimeout(resolve, 500));
    proxy.muteOpenConnections();

    const events = Array.from({ length: ROWS }, () => ({
      id: randomUUID(),
      business_id: 'biz_orphans',
      mode: 'test' as const,
      type: 'payment.session.succeeded',
      payment_id: null,
      payload: '{"event":"payment.session.succeeded","data":{},"checksum":"x"}',
    }));
    await direct.db.insertInto('events').values(events).execute();
    await direct.db
      .insertInto('deliveries')
      .values(events.map((e) => ({ event_id: e.id, url })))
      .execute();
    const woken = Date.now();
    worker.wake();

    // The claim ran on a connection whose answer is lost: the rows are claimed, by this worker.
    await expect
      .poll(
        async () =>
          (
            await direct.db
              .selectFrom('deliveries')
              .select('id')
              .where('url', '=', url)
              .where('claim_token', 'is not', null)
              .execute()
          ).length,
        { timeout: 10_000, interval: 20 },
      )
      .toBe(ROWS);

    await expect
      .poll(() => receiver.events.get('/orphans')?.length ?? 0, { timeout: 30_000, interval: 100 })
      .toBe(ROWS);
    const took = Date.now() - woken;
    expect(took, `delivered ${took} ms after the wake-up`).toBeLessThan(20_000);
    expect(new Set(receiver.events.get('/orphans')).size).toBe(ROWS);
    // Its health never went down: nothing but the worker's own sweep gave the rows back.
    expect(remote.health.state).toBe('up');
  });
});
