import { randomUUID } from 'node:crypto';
import type { ClaimRequest, IdempotencyStore } from '../store/types.js';

/** Makes a fresh, empty store for one test, keeping finished records for `retentionMs`. */
export type StoreFactory = (options: { retentionMs: number }) => Promise<IdempotencyStore>;

/** The matchers the contract uses: those of Vitest's and Jest's `expect`. */
export interface StoreContractAssertion {
  toBe(expected: unknown): void;
  toEqual(expected: unknown): void;
  toMatchObject(expected: object): void;
  toHaveLength(length: number): void;
  toBeUndefined(): void;
  toContain(item: string): void;
}

/**
 * The test functions the contract registers its tests with. Vitest's and Jest's fit as they are;
 * they are passed in so that this module depends on no test runner.
 */
export interface StoreContractTestApi {
  describe(name: string, body: () => void): void;
  it(name: string, body: () => Promise<void>): void;
  afterEach(body: () => Promise<void>): void;
  expect(actual: unknown): StoreContractAssertion;
}

/** A lease or a retention that outlasts any test, in ms. */
export const LONG = 60_000;
/** Resolves after `ms` milliseconds. */
export const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * How a contract's tests open their stores: each from `factory` (kept `LONG` unless a retention is
 * given), and closed, every one, after its test.
 */
export function storesClosedAfterEach(
  factory: StoreFactory,
  afterEach: StoreContractTestApi['afterEach'],
): (retentionMs?: number) => Promise<IdempotencyStore> {
  const opened: IdempotencyStore[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((s) => s.close?.()));
  });
  return async (retentionMs = LONG) => {
    const store = await factory({ retentionMs });
    opened.push(store);
    return store;
  };
}

/**
 * Registers the idempotency store contract (see {@link IdempotencyStore}) as a `describe` block:
 * claims (exactly one winner, however many claim a key at once), leases and their renewal,
 * completion and failure by the owner only, recovery of lapsed leases, and retention. The memory
 * store and the Redis store run it; a store of your own should too.
 *
 * `factory` is called for each test and must return an empty store (use a fresh key prefix or
 * database per call); after each test the suite calls `close()` on every store it opened. Leases
 * and retentions of 30 to 100 ms are used, and checked 40 ms or more after they end: a store must
 * honour `leaseMs` and `retentionMs` in milliseconds, neither rounding them to seconds nor
 * ending them early.
 *
 * @example
 * ```ts
 * // my-store.test.ts
 * import { randomUUID } from 'node:crypto';
 * import { describeStoreContract } from '@payhook/core/testing';
 * import { afterEach, describe, expect, it } from 'vitest';
 * import { createMyStore } from '../src/index.js';
 *
 * describeStoreContract(
 *   'my store',
 *   async ({ retentionMs }) => createMyStore({ prefix: `test:${randomUUID()}`, retentionMs }),
 *   { describe, it, expect, afterEach },
 * );
 * ```
 */
export function describeStoreContract(name: string, factory: StoreFactory, test: StoreContractTestApi): void {
  const { describe, it, expect, afterEach } = test;
  describe(`store contract: ${name}`, () => {
    const open = storesClosedAfterEach(factory, afterEach);
    const request = (
      owner: string,
      leaseMs = LONG,
      payload = '{"event":"e","data":{},"checksum":"c"}',
    ): ClaimRequest => ({
      owner,
      leaseMs,
      payload,
      businessId: 'biz-1',
    });

    it('claims a new key once; a second claim under a live lease is a duplicate', async () => {
      const store = await open();
      const key = randomUUID();
      expect(await store.claim(key, request('a'))).toEqual({
        status: 'claimed',
        attempts: 1,
        previous: 'new',
      });
      expect(await store.claim(key, request('b'))).toEqual({
        status: 'duplicate',
        state: 'processing',
        owner: 'a',
      });
      const record = await store.get(key);
      expect(record).toMatchObject({
        key,
        state: 'processing',
        owner: 'a',
        attempts: 1,
        businessId: 'biz-1',
      });
      expect(record?.payload).toBe('{"event":"e","data":{},"checksum":"c"}');
    });

    it('never grants a live lease twice, not even to the owner that holds it', async () => {
      const store = await open();
      const key = randomUUID();
      await store.claim(key, request('a'));
      expect(await store.claim(key, request('a'))).toEqual({
        status: 'duplicate',
        state: 'processing',
        owner: 'a',
      });
      expect(await store.get(key)).toMatchObject({ owner: 'a', attempts: 1 });
      expect(await store.complete(key, 'a')).toBe(true);
    });

    describe('concurrency', () => {
      // Claims are started together and awaited together: on Redis they reach the server in one
      // pipeline burst, on the memory store they interleave at every await.
      const burst = (store: IdempotencyStore, key: string, owners: string[]) =>
        Promise.all(owners.map((owner) => store.claim(key, request(owner))));

      // Loops rather than `it.each`, which not every runner has.
      for (const n of [1, 2, 20, 200]) {
        it(`${n} concurrent claims of one key from one owner: exactly one claimed`, async () => {
          const store = await open();
          const key = randomUUID();
          const results = await burst(
            store,
            key,
            Array.from({ length: n }, () => 'same-owner'),
          );
          expect(results.filter((r) => r.status === 'claimed')).toHaveLength(1);
          expect(results.filter((r) => r.status === 'duplicate')).toHaveLength(n - 1);
          expect(await store.get(key)).toMatchObject({
            state: 'processing',
            owner: 'same-owner',
            attempts: 1,
          });
        });
      }

      for (const n of [2, 20, 200]) {
        it(`${n} concurrent claims of one key from several owners: exactly one claimed`, async () => {
          const store = await open();
          const key = randomUUID();
          const owners = Array.from({ length: n }, (_, i) => `owner-${i % 3}`);
          const results = await burst(store, key, owners);
          expect(results.filter((r) => r.status === 'claimed')).toHaveLength(1);
          const winner = owners[results.findIndex((r) => r.status === 'claimed')];
          expect(await store.get(key)).toMatchObject({ owner: winner, attempts: 1 });
        });
      }

      it('concurrent claims of a failed key: exactly one takes the second chance', async () => {
        const store = await open();
        const key = randomUUID();
        await store.claim(key, request('a'));
        await store.fail(key, 'a', 'Error: boom');
        const results = await burst(store, key, ['a', 'a', 'b', 'c', 'b']);
        expect(results.filter((r) => r.status === 'claimed')).toEqual([
          { status: 'claimed', attempts: 2, previous: 'failed' },
        ]);
      });

      it('concurrent claims and recoveries of a lapsed lease: exactly one new owner', async () => {
        const store = await open();
        const key = randomUUID();
        await store.claim(key, request('dead', 30));
        await wait(70);
        const [claims, recovered] = await Promise.all([
          burst(store, key, ['a', 'b', 'a', 'c']),
          Promise.all([store.recover('r1', LONG, 10), store.recover('r2', LONG, 10)]),
        ]);
        const winners =
          claims.filter((r) => r.status === 'claimed').length +
          recovered.flat().filter((r) => r.key === key).length;
        expect(winners).toBe(1);
      });
    });

    it('keeps keys apart', async () => {
      const store = await open();
      const [k1, k2] = [randomUUID(), randomUUID()];
      expect((await store.claim(k1, request('a'))).status).toBe('claimed');
      expect((await store.claim(k2, request('a'))).status).toBe('claimed');
      expect(await store.get(randomUUID())).toBeUndefined();
    });

    it('lets exactly one of many concurrent claims win', async () => {
      const store = await open();
      const key = randomUUID();
      const results = await Promise.all(
        Array.from({ length: 50 }, (_, i) => store.claim(key, request(`o${i}`))),
      );
      expect(results.filter((r) => r.status === 'claimed')).toHaveLength(1);
    });

    it('completes: a tombstone refuses duplicates, and only the owner can complete', async () => {
      const store = await open();
      const key = randomUUID();
      await store.claim(key, request('a'));
      expect(await store.complete(key, 'b')).toBe(false);
      expect(await store.complete(key, 'a')).toBe(true);
      expect(await store.claim(key, request('b'))).toEqual({ status: 'duplicate', state: 'done' });
      expect(await store.get(key)).toMatchObject({ state: 'done' });
      expect(await store.complete(key, 'a')).toBe(false);
      expect(await store.fail(key, 'a', 'late')).toBe(false);
    });

    it('fails: keeps payload and error, and a new claim takes it again', async () => {
      const store = await open();
      const key = randomUUID();
      await store.claim(key, request('a'));
      expect(await store.fail(key, 'b', 'not mine')).toBe(false);
      expect(await store.fail(key, 'a', 'Error: boom')).toBe(true);
      expect(await store.get(key)).toMatchObject({
        state: 'failed',
        error: 'Error: boom',
        businessId: 'biz-1',
      });
      expect((await store.get(key))?.payload).toContain('"event"');
      expect(await store.claim(key, request('b'))).toEqual({
        status: 'claimed',
        attempts: 2,
        previous: 'failed',
      });
      expect(await store.complete(key, 'b')).toBe(true);
    });

    it('a lapsed lease can be claimed again, and the old owner can no longer complete, fail or renew', async () => {
      const store = await open();
      const key = randomUUID();
      await store.claim(key, request('a', 40));
      await wait(80);
      expect(await store.claim(key, request('b'))).toEqual({
        status: 'claimed',
        attempts: 2,
        previous: 'expired',
      });
      expect(await store.complete(key, 'a')).toBe(false);
      expect(await store.fail(key, 'a', 'x')).toBe(false);
      expect(await store.renew(key, 'a', LONG)).toBe(false);
      expect(await store.complete(key, 'b')).toBe(true);
    });

    it('renewal keeps a lease alive', async () => {
      const store = await open();
      const key = randomUUID();
      await store.claim(key, request('a', 100));
      for (let i = 0; i < 5; i++) {
        await wait(40);
        expect(await store.renew(key, 'a', 100)).toBe(true);
      }
      expect(await store.claim(key, request('b'))).toEqual({
        status: 'duplicate',
        state: 'processing',
        owner: 'a',
      });
      expect(await store.recover('b', LONG, 10)).toEqual([]);
    });

    it('recovers events whose lease lapsed, for a new owner, and nothing else', async () => {
      const store = await open();
      const lapsed = [randomUUID(), randomUUID(), randomUUID()];
      for (const key of lapsed) await store.claim(key, request('dead', 30, `{"k":"${key}"}`));
      const live = randomUUID();
      await store.claim(live, request('alive'));
      const done = randomUUID();
      await store.claim(done, request('alive', 30));
      await store.complete(done, 'alive');
      const failed = randomUUID();
      await store.claim(failed, request('alive', 30));
      await store.fail(failed, 'alive', 'x');
      await wait(70);

      const first = await store.recover('rescuer', LONG, 2);
      expect(first).toHaveLength(2);
      const rest = await store.recover('rescuer', LONG, 10);
      const recovered = [...first, ...rest];
      expect(recovered.map((r) => r.key).sort()).toEqual([...lapsed].sort());
      for (const r of recovered) {
        expect(r).toMatchObject({ payload: `{"k":"${r.key}"}`, businessId: 'biz-1', attempts: 2 });
      }
      expect(await store.recover('other', LONG, 10)).toEqual([]);
      const key = lapsed[0] as string;
      expect(await store.complete(key, 'dead')).toBe(false);
      expect(await store.complete(key, 'rescuer')).toBe(true);
    });

    it('forgets finished events after the retention, so the key can be claimed anew', async () => {
      const store = await open(60);
      const key = randomUUID();
      await store.claim(key, request('a'));
      await store.complete(key, 'a');
      expect((await store.claim(key, request('b'))).status).toBe('duplicate');
      await wait(120);
      expect(await store.get(key)).toBeUndefined();
      expect(await store.claim(key, request('b'))).toEqual({
        status: 'claimed',
        attempts: 1,
        previous: 'new',
      });
    });
  });
}
