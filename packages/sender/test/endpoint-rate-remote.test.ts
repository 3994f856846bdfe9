// @module-tag postgres
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDeliveryClient, createDeliveryWorker, type DeliveryWorker } from '../src/index.js';
import { type CountingReceiver, startCountingReceiver } from './fixtures/counting-receiver.js';
import { attemptStarts, queueDeliveries } from './fixtures/deliveries.js';
import { openProxiedDatabase, type ProxiedDatabase } from './fixtures/proxied-database.js';

// A rate limit is a rate, not a ceiling below it: with PostgreSQL 15 ms away each way (a TCP proxy
// of the test's own holds every chunk), an endpoint limited to 100 a second drains its backlog at
// 90 a second or more, and never faster than its limit. Each attempt's slot is a statement; were
// the slots taken one at a time inside the URL's few concurrency slots, the round trips would
// hold the rate at a fraction of the limit. Judged on the recorded attempt times.

const RATE = 100;
const BACKLOG = 400;
const DELAY_MS = 15;

describe(`an endpoint limited to ${RATE} a second, PostgreSQL ${DELAY_MS} ms away`, {
  timeout: 120_000,
}, () => {
  let db: ProxiedDatabase;
  let worker: DeliveryWorker;
  let receiver: CountingReceiver;

  beforeAll(async () => {
    receiver = await startCountingReceiver({});
    db = await openProxiedDatabase('rate_remote');
    db.proxy.delay(DELAY_MS);
  }, 60_000);
  afterAll(async () => {
    await worker?.stop();
    await db?.cleanup();
    receiver?.server.close();
  });

  it(`drains a backlog of ${BACKLOG} at 0.8x its limit or more, never above it`, async () => {
    const url = `${receiver.origin}/limited`;
    const { id: endpointId } = await db.direct.db
      .insertInto('webhook_endpoints')
      .values({
        business_id: 'biz_test',
        mode: 'test',
        url,
        account_secrets: true,
        rate_limit_per_second: RATE,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    const ids = await queueDeliveries(db.direct, url, BACKLOG, endpointId);

    worker = createDeliveryWorker({
      database: db.remote,
      client: createDeliveryClient({ allowPrivate: true }),
      pollIntervalMs: 100,
    });
    await worker.start();
    await expect
      .poll(() => receiver.events.get('/limited')?.length ?? 0, { timeout: 60_000, interval: 100 })
      .toBe(BACKLOG);
    await worker.stop();

    const starts = await attemptStarts(db.direct, ids);
    expect(starts).toHaveLength(BACKLOG);
    // The rate past the first second (the start: the worker's first claims, the limit's first
    // read): attempts over the time they took.
    const from = (starts[0] as number) + 1000;
    const steady = starts.filter((t) => t >= from);
    const rate = ((steady.length - 1) * 1000) / ((steady.at(-1) as number) - (steady[0] as number));
    // 0.8x: on a loaded two-core machine (a benchmark beside the tests) it drained at 0.85x.
    expect(rate, `drained at ${rate.toFixed(1)} a second`).toBeGreaterThanOrEqual(0.8 * RATE);
    // Never above the limit: the slots are 10 ms apart, each taken no earlier than a round trip
    // after it was asked for (a slot already past when its answer came back would start at once,
    // beside the next ones), and an attempt starts at its slot or later. A window that opens on a
    // start its timer made late holds the slots of those ms too: 2 more for 20 ms at 100 a second.
    // Unpaced, the backlog would go in one burst of hundreds.
    for (const t of starts) {
      expect(starts.filter((s) => s >= t && s < t + 1000).length).toBeLessThanOrEqual(RATE + 2);
    }
  });
});
