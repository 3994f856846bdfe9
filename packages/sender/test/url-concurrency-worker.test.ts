// @module-tag postgres
// @module-tag pglite
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UrlConcurrency } from '../src/delivery/url-concurrency.js';
import { createDeliveryClient, createDeliveryWorker, type Database } from '../src/index.js';
import { queueDeliveries } from './fixtures/deliveries.js';
import { openTestDatabase, testStorages } from './fixtures/storage.js';

// Each URL's concurrency follows its answers in the real worker: a fast URL with a backlog is
// sent to with more than the starting 4 at once, within the maximum; a slow one and a failing one
// fall to the minimum, and never hold more than they started with.

/** A receiver on loopback: `/fast` answers 200 after 5 ms, `/slow` after 300 ms, `/fail` 503 at once. */
async function startReceiver() {
  const open = new Map<string, number>();
  const most = new Map<string, number>();
  const answered = new Map<string, string[]>();
  const server: Server = createServer((req, res) => {
    const path = req.url ?? '/';
    open.set(path, (open.get(path) ?? 0) + 1);
    most.set(path, Math.max(most.get(path) ?? 0, open.get(path) ?? 0));
    req.resume();
    req.on('end', () =>
      setTimeout(
        () => {
          open.set(path, (open.get(path) ?? 1) - 1);
          const got = answered.get(path) ?? [];
          got.push(String(req.headers['payhook-delivery-id']));
          answered.set(path, got);
          res.writeHead(path === '/fail' ? 503 : 200).end();
        },
        path === '/slow' ? 300 : path === '/fast' ? 5 : 0,
      ),
    );
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url: (path: string) => `${origin}${path}`, most, answered, server };
}

describe.each(testStorages())('per-URL concurrency in the worker on %s', { timeout: 150_000 }, (storage) => {
  let database: Database;
  let cleanup: () => Promise<void>;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  beforeAll(async () => {
    ({ database, cleanup } = await openTestDatabase(storage, 'url_concurrency'));
    receiver = await startReceiver();
  }, 60_000);
  afterAll(async () => {
    receiver?.server.close();
    await cleanup?.();
  });

  it('grows a fast URL past where it starts, within the maximum, and cuts a slow and a failing one to the minimum', async () => {
    const fast = receiver.url('/fast');
    const slow = receiver.url('/slow');
    const fail = receiver.url('/fail');
    const fastDeliveries = await queueDeliveries(database, fast, 600);
    await queueDeliveries(database, slow, 30);
    await queueDeliveries(database, fail, 30);
    const concurrency = new UrlConcurrency({ initial: 4, min: 1, max: 24, slowMs: 100 });
    const worker = createDeliveryWorker({
      database,
      client: createDeliveryClient({ allowPrivate: true }),
      concurrency: 64,
      perUrlConcurrency: concurrency,
      pollIntervalMs: 50,
    });
    await worker.start();
    try {
      await expect
        .poll(
          () => (receiver.answered.get('/fast')?.length ?? 0) + (receiver.answered.get('/slow')?.length ?? 0),
          {
            timeout: 100_000,
            interval: 100,
          },
        )
        .toBe(630);
    } finally {
      await worker.stop();
    }
    // Every fast delivery once, none twice.
    expect([...(receiver.answered.get('/fast') ?? [])].sort()).toEqual([...fastDeliveries].sort());

    // The fast URL got room: more than the 4 it started with were sent at once, never more than 24.
    expect(concurrency.limit(fast)).toBeGreaterThan(4);
    expect(concurrency.limit(fast)).toBeLessThanOrEqual(24);
    expect(receiver.most.get('/fast')).toBeGreaterThan(4);
    expect(receiver.most.get('/fast')).toBeLessThanOrEqual(24);

    // The slow and the failing URLs fell to 1 and never held more than they started with.
    expect(concurrency.limit(slow)).toBe(1);
    expect(concurrency.limit(fail)).toBe(1);
    expect(receiver.most.get('/slow')).toBeLessThanOrEqual(4);
    expect(receiver.most.get('/fail')).toBeLessThanOrEqual(4);
  });
});
