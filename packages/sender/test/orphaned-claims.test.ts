// @module-tag postgres
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDeliveryClient, createDeliveryWorker, type DeliveryWorker } from '../src/index.js';
import { type CountingReceiver, startCountingReceiver } from './fixtures/counting-receiver.js';
import { queueDeliveries } from './fixtures/deliveries.js';
import { openProxiedDatabase, type ProxiedDatabase } from './fixtures/proxied-database.js';

// A claim whose answer is lost commits on the server all the same: its rows are claimed by a
// worker that never heard of them. With the database up throughout (new connections work, so its
// health never goes down and comes back), those rows must not wait for their lease to end (a
// minute): the worker gives back what it claimed and does not hold, within seconds of the failure.

const ROWS = 5;

describe('a claim that committed after the worker gave it up', { timeout: 90_000 }, () => {
  let db: ProxiedDatabase;
  let worker: DeliveryWorker;
  let receiver: CountingReceiver;

  beforeAll(async () => {
    receiver = await startCountingReceiver({});
    db = await openProxiedDatabase('orphans', { statementTimeoutMs: 500 });
  }, 60_000);
  afterAll(async () => {
    await worker?.stop();
    await db?.cleanup();
    receiver?.server.close();
  });

  it('gives the rows back within seconds, not at the end of their 60 s lease, and sends each once', async () => {
    const url = `${receiver.origin}/orphans`;
    worker = createDeliveryWorker({
      database: db.remote,
      client: createDeliveryClient({ allowPrivate: true }),
      leaseMs: 60_000,
      // No poll: only the wake-up below, and what the worker does after the failure, claim.
      pollIntervalMs: 600_000,
    });
    await worker.start();
    // The worker's connections are open (its first claims ran); from now on their answers are lost.
    await new Promise((resolve) => setTimeout(resolve, 500));
    db.proxy.muteOpenConnections();

    await queueDeliveries(db.direct, url, ROWS);
    const woken = Date.now();
    worker.wake();

    // The claim ran on a connection whose answer is lost: the rows are claimed, by this worker.
    await expect
      .poll(
        async () =>
          (
            await db.direct.db
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
    expect(db.remote.health.state).toBe('up');
  });
});
