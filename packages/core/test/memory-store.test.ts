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
});
