import { describeOrderContract, describeStoreContract } from '@payhook/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryStore } from '../src/index.js';

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
