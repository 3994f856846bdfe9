import { describeStoreContract } from '@payhook/core/testing';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createRedisStore } from '../src/index.js';
import { cleanup, connect, randomPrefix, TEST_REDIS_URL } from './redis.js';

let redis: Redis;
const prefixes: string[] = [];
beforeAll(async () => {
  redis = await connect();
});
afterAll(async () => {
  for (const prefix of prefixes) await cleanup(redis, prefix);
  redis.disconnect();
});

describeStoreContract(
  'redis',
  async ({ retentionMs }) => {
    const prefix = randomPrefix();
    prefixes.push(prefix);
    return createRedisStore({ redis, prefix, retentionMs });
  },
  { describe, it, expect, afterEach },
);

describe('createRedisStore', () => {
  it('validates its options', () => {
    expect(() => createRedisStore({ redis, prefix: 'a{b}' })).toThrow(/prefix/);
    expect(() => createRedisStore({ redis, retentionMs: 0 })).toThrow(/retentionMs/);
    expect(() => createRedisStore({ redis, commandTimeoutMs: -1 })).toThrow(/commandTimeoutMs/);
    expect(() => createRedisStore({ redis, leaseMs: 0 })).toThrow(/leaseMs/);
    expect(() => createRedisStore({ redis: {} as never })).toThrow(/ioredis client/);
  });

  it('closes the client it created from a URL, and never a client it was given', async () => {
    const own = createRedisStore({ redis: TEST_REDIS_URL, prefix: randomPrefix() });
    await own.get('x:y');
    await own.close?.();
    expect(own.redis.status).toBe('end');
    const given = createRedisStore({ redis, prefix: randomPrefix() });
    await given.close?.();
    expect(await redis.ping()).toBe('PONG');
  });

  it('claims and completes an event in two round trips once the business is known', async () => {
    const prefix = randomPrefix();
    prefixes.push(prefix);
    const store = createRedisStore({ redis, prefix });
    const request = { owner: 'a', leaseMs: 10_000, payload: '{}', businessId: 'biz' };
    await store.claim('biz:warm', request);
    const before = store.commandCount;
    await store.claim('biz:c0ffee', request);
    await store.complete('biz:c0ffee', 'a');
    expect(store.commandCount - before).toBe(2);
  });
});
