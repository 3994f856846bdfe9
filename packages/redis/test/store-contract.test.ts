// @module-tag redis
// @module-tag process
import { randomBytes, randomUUID } from 'node:crypto';
import { describeOrderContract, describeStoreContract } from '@payhook/core/testing';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type RedisClusterProcess, startRedisCluster } from '../../../test/support/redis-cluster.js';
import { keySlot, masterOf, nodeName } from '../src/cluster.js';
import { createRedisStore, type RedisStore } from '../src/index.js';
import { keyNames, tagsKey } from '../src/keys.js';
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
    return createRedisStore({ redis, prefix, retentionMs, checkPersistence: false });
  },
  { describe, it, expect, afterEach },
);

describeOrderContract(
  'redis',
  async ({ retentionMs }) => {
    const prefix = randomPrefix();
    prefixes.push(prefix);
    return createRedisStore({ redis, prefix, retentionMs, checkPersistence: false });
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
    expect(() => createRedisStore({ redis, durability: 'quorum' as never })).toThrow(/durability/);
    expect(() => createRedisStore({ redis, durability: 'replicas', replicas: 0 })).toThrow(/replicas/);
    expect(() => createRedisStore({ redis, durability: 'replicas', waitMs: 1000 })).toThrow(
      /waitMs: 1000 \(expected a positive integer of milliseconds below commandTimeoutMs, 1000\)/,
    );
  });

  it('closes the client it created from a URL, and never a client it was given', async () => {
    const own = createRedisStore({ redis: TEST_REDIS_URL, prefix: randomPrefix(), checkPersistence: false });
    await own.get('x:y');
    await own.close?.();
    expect(own.redis.status).toBe('end');
    const given = createRedisStore({ redis, prefix: randomPrefix(), checkPersistence: false });
    await given.close?.();
    expect(await redis.ping()).toBe('PONG');
  });

  it('claims and completes an event in two round trips once the business is known', async () => {
    const prefix = randomPrefix();
    prefixes.push(prefix);
    await expectTwoRoundTrips(createRedisStore({ redis, prefix, checkPersistence: false }));
  });
});

// The same contract on a Redis Cluster of the test's own: three masters on loopback ports.
describe('on a Redis Cluster', () => {
  let cluster: RedisClusterProcess;
  let client: Cluster;
  beforeAll(async () => {
    cluster = await startRedisCluster();
    client = cluster.client();
    await client.ping();
  }, 30_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  describeStoreContract(
    'redis cluster',
    async ({ retentionMs }) =>
      createRedisStore({ redis: client, prefix: randomPrefix(), retentionMs, checkPersistence: false }),
    { describe, it, expect, afterEach },
  );
  describeOrderContract(
    'redis cluster',
    async ({ retentionMs }) =>
      createRedisStore({ redis: client, prefix: randomPrefix(), retentionMs, checkPersistence: false }),
    { describe, it, expect, afterEach },
  );

  it("computes each key slot as the cluster does: a script's keys in one slot, the tags set in its own", async () => {
    for (const business of [randomUUID(), '', 'acct:with:colons']) {
      const k = keyNames('payhook:prod', `${business}:${randomBytes(32).toString('hex')}`);
      for (const key of [k.record, k.leases, tagsKey('payhook:prod')]) {
        expect(await client.cluster('KEYSLOT', key), key).toBe(keySlot(key));
      }
    }
  });

  it('claims and completes an event in two round trips once the business is known', async () => {
    const store = createRedisStore({ redis: client, prefix: randomPrefix(), checkPersistence: false });
    expect(store.redis).toBe(client);
    await expectTwoRoundTrips(store);
  });

  it('keeps businesses on every master, and recovery finds lapsed events on each of them', async () => {
    const prefix = randomPrefix();
    const store = createRedisStore({ redis: client, prefix, checkPersistence: false });
    const keys = Array.from({ length: 30 }, () => `${randomUUID()}:${randomBytes(32).toString('hex')}`);
    for (const key of keys) {
      const businessId = key.split(':')[0] as string;
      const claim = await store.claim(key, {
        owner: 'a',
        leaseMs: 50,
        payload: `{"k":"${key}"}`,
        businessId,
      });
      expect(claim).toMatchObject({ status: 'claimed' });
    }
    const masters = new Set(
      keys.map((key) => nodeName(masterOf(client, keyNames(prefix, key).record) as Redis)),
    );
    expect(masters.size).toBe(3);
    await new Promise((resolve) => setTimeout(resolve, 80));
    const recovered = await store.recover('b', 10_000, 100);
    expect(recovered.map((event) => event.key).sort()).toEqual([...keys].sort());
    for (const event of recovered) {
      expect(event).toMatchObject({ payload: `{"k":"${event.key}"}`, attempts: 2 });
      expect(await store.complete(event.key, 'b')).toBe(true);
      expect(await store.get(event.key)).toMatchObject({ state: 'done' });
    }
    expect(await store.recover('c', 10_000, 100)).toEqual([]);
  });
});

/** Once its business is known, an event costs the store two commands: the claim and the completion. */
async function expectTwoRoundTrips(store: RedisStore<Redis | Cluster>): Promise<void> {
  const request = { owner: 'a', leaseMs: 10_000, payload: '{}', businessId: 'biz' };
  await store.claim('biz:warm', request);
  const before = store.commandCount;
  await store.claim('biz:c0ffee', request);
  await store.complete('biz:c0ffee', 'a');
  expect(store.commandCount - before).toBe(2);
}
