import { describeOrderContract, describeStoreContract } from '@payhook/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { checkMilliseconds, createMemoryStore, withStoreTimeout } from '../src/index.js';

describeStoreContract('memory', async ({ retentionMs }) => createMemoryStore({ retentionMs }), {
  describe,
  it,
  expect,
  afterEach,
});

describeOrderContract('memory', async ({ retentionMs }) => createMemoryStore({ retentionMs }), {
  describe,
  it,
  expect,
  afterEach,
});

describe('createMemoryStore', () => {
  it('rejects a retention that is not a positive number', () => {
    expect(() => createMemoryStore({ retentionMs: 0 })).toThrow(/retentionMs/);
    expect(() => createMemoryStore({ retentionMs: Number.NaN })).toThrow(TypeError);
  });

  it('evicts the oldest finished records past maxEntries', async () => {
    const store = createMemoryStore({ maxEntries: 10 });
    for (let i = 0; i < 20; i++) {
      await store.claim(`k${i}`, { owner: 'a', leaseMs: 1000, payload: '{}', businessId: 'b' });
      await store.complete(`k${i}`, 'a');
    }
    expect(await store.get('k0')).toBeUndefined();
    expect(await store.get('k19')).toMatchObject({ state: 'done' });
  });

  it("bounds the payments' order records by maxEntries too, evicting the oldest", async () => {
    const store = createMemoryStore({ maxEntries: 10 });
    const order = store.order;
    if (order === undefined) throw new Error('the memory store keeps per-object order');
    const rankOf = async (object: string) => {
      const key = `biz:${object}-probe`;
      await store.claim(key, { owner: 'a', leaseMs: 1000, payload: '{}', businessId: 'biz' });
      const lock = await order.lock(key, 'a', object);
      await store.complete(key, 'a');
      return lock.status === 'locked' ? lock.rank : lock.status;
    };
    for (let i = 0; i < 20; i++) {
      const key = `biz:k${i}`;
      await store.claim(key, { owner: 'a', leaseMs: 1000, payload: '{}', businessId: 'biz' });
      await order.lock(key, 'a', `pay_${i}`);
      await order.complete(key, 'a', `pay_${i}`, 20);
    }
    expect(await rankOf('pay_19')).toBe(20);
    expect(await rankOf('pay_0')).toBeUndefined();
  });
});

describe('store helpers', () => {
  it('checkMilliseconds returns a positive value and names a wrong one', () => {
    expect(checkMilliseconds('leaseMs', 1.5, 'number')).toBe(1.5);
    expect(checkMilliseconds('retentionMs', 60_000, 'integer')).toBe(60_000);
    expect(() => checkMilliseconds('retentionMs', 1.5, 'integer')).toThrow(
      new TypeError('Invalid retentionMs: 1.5 (expected a positive integer of milliseconds).'),
    );
    expect(() => checkMilliseconds('commandTimeoutMs', Number.POSITIVE_INFINITY, 'number')).toThrow(
      new TypeError('Invalid commandTimeoutMs: Infinity (expected a positive number of milliseconds).'),
    );
    expect(() => checkMilliseconds('leaseMs', 0, 'number')).toThrow(TypeError);
  });

  it("withStoreTimeout settles as the command does, or with the store's error once the time is up", async () => {
    await expect(
      withStoreTimeout(
        1000,
        async () => 'answer',
        () => new Error('late'),
      ),
    ).resolves.toBe('answer');
    const failure = new Error('refused');
    await expect(
      withStoreTimeout(
        1000,
        () => Promise.reject(failure),
        () => new Error('late'),
      ),
    ).rejects.toBe(failure);
    const never = () => new Promise<never>(() => {});
    await expect(withStoreTimeout(20, never, () => new RangeError('no answer within 20 ms'))).rejects.toThrow(
      new RangeError('no answer within 20 ms'),
    );
  });
});
