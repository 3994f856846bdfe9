// @module-tag redis
import { createReceiver } from '@payhook/core';
import { createTestEvent } from '@payhook/core/testing';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FaultProxy, startProxy } from '../../../test/support/fault-proxy.js';
import { createRedisStore } from '../src/index.js';
import { cleanup, connect, randomPrefix, TEST_REDIS_URL } from './redis.js';

const BIZ = '7d1e5c3a-2b4f-4a6e-8c9d-0e1f2a3b4c5d';
let redis: Redis;
let proxy: FaultProxy;
const prefix = randomPrefix();

beforeAll(async () => {
  redis = await connect();
  const target = new URL(TEST_REDIS_URL);
  proxy = await startProxy({ host: target.hostname, port: Number(target.port || 6379) });
});
afterAll(async () => {
  await proxy.close();
  await cleanup(redis, prefix);
  redis.disconnect();
});

const request = (body: unknown) => ({
  method: 'POST',
  contentType: 'application/json',
  remoteAddress: '127.0.0.1',
  rawBody: JSON.stringify(body),
});

describe.sequential('Redis unreachable (through a proxy of the test)', () => {
  it('answers 503 store_unavailable while Redis cannot answer, never 200, and recovers by itself', async () => {
    const store = createRedisStore({
      redis: proxy.url,
      prefix,
      commandTimeoutMs: 200,
      checkPersistence: false,
    });
    const receiver = createReceiver({ businessIds: [BIZ], allowAnyIp: true, store, recoveryIntervalMs: 0 });
    const handled: string[] = [];
    receiver.onAny((event) => {
      handled.push(event.checksum);
    });
    const send = async (body: unknown) => {
      const result = await receiver.handle(request(body));
      result.afterResponse?.();
      return result;
    };

    const before = createTestEvent('payment.session.created', BIZ);
    expect((await send(before)).status).toBe(200);

    // A partition: connections stay open, nothing passes. Each command gives up at its timeout.
    proxy.blackhole();
    const during = createTestEvent('payment.session.succeeded', BIZ);
    const partitioned = await send(during);
    expect(partitioned.status).toBe(503);
    expect(partitioned.body).toMatchObject({ error: { code: 'store_unavailable' } });

    // Connections refused outright.
    proxy.drop();
    expect((await send(during)).status).toBe(503);

    // Back: the client reconnects by itself, and the sender's retry is accepted and processed once.
    proxy.restore();
    let status = 0;
    for (let i = 0; i < 100 && status !== 200; i++) {
      status = (await send(during)).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 50));
    }
    expect(status).toBe(200);
    await receiver.close();
    expect(handled.sort()).toEqual([before.checksum, during.checksum].sort());
    await store.close?.();
  });
});
