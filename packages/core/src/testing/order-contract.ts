import { randomBytes, randomUUID } from 'node:crypto';
import type { IdempotencyStore, ObjectOrderStore } from '../store/types.js';
import {
  LONG,
  type StoreContractTestApi,
  type StoreFactory,
  storesClosedAfterEach,
  wait,
} from './store-contract.js';

/**
 * Registers the contract of per-object order ({@link ObjectOrderStore}, a store's optional
 * `order`) as a `describe` block: one lock per object, held by one event for as long as that
 * event's lease lives and freed by its completion, its failure or the lease's lapse; the rank
 * raised, never lowered, in the step that marks the event done; objects kept apart by business.
 * The memory, Redis and PostgreSQL stores run it; a store of your own that has `order` should too,
 * beside {@link describeStoreContract}, with the same factory.
 *
 * @example
 * ```ts
 * describeOrderContract('my store', async ({ retentionMs }) => createMyStore({ retentionMs }), {
 *   describe, it, expect, afterEach,
 * });
 * ```
 */
export function describeOrderContract(name: string, factory: StoreFactory, test: StoreContractTestApi): void {
  const { describe, it, expect, afterEach } = test;
  describe(`order contract: ${name}`, () => {
    const openStore = storesClosedAfterEach(factory, afterEach);
    const open = async (): Promise<{ store: IdempotencyStore; order: ObjectOrderStore }> => {
      const store = await openStore();
      const order = store.order;
      expect(typeof order?.lock).toBe('function');
      expect(typeof order?.complete).toBe('function');
      return { store, order: order as ObjectOrderStore };
    };
    const business = randomUUID();
    const eventKey = (biz = business) => `${biz}:${randomBytes(16).toString('hex')}`;
    /** Claims a new event for `owner`. */
    const claimed = async (store: IdempotencyStore, owner = 'a', leaseMs = LONG, biz = business) => {
      const key = eventKey(biz);
      const claim = await store.claim(key, { owner, leaseMs, payload: '{}', businessId: biz });
      expect(claim.status).toBe('claimed');
      return key;
    };

    it('locks for an event its owner holds, and answers lost otherwise', async () => {
      const { store, order } = await open();
      expect(await order.lock(eventKey(), 'a', 'pay_1')).toEqual({ status: 'lost' });
      const key = await claimed(store);
      expect(await order.lock(key, 'b', 'pay_1')).toEqual({ status: 'lost' });
      expect(await order.lock(key, 'a', 'pay_1')).toEqual({ status: 'locked', rank: undefined });
      // Asking again for the lock it holds is no conflict.
      expect(await order.lock(key, 'a', 'pay_1')).toEqual({ status: 'locked', rank: undefined });
    });

    it('holds one event per object; other objects and other businesses go on', async () => {
      const { store, order } = await open();
      const [first, second, other] = [await claimed(store), await claimed(store, 'b'), await claimed(store)];
      const elsewhere = await claimed(store, 'a', LONG, randomUUID());
      expect(await order.lock(first, 'a', 'pay_1')).toMatchObject({ status: 'locked' });
      expect(await order.lock(second, 'b', 'pay_1')).toEqual({ status: 'busy' });
      expect(await order.lock(other, 'a', 'pay_2')).toMatchObject({ status: 'locked' });
      expect(await order.lock(elsewhere, 'a', 'pay_1')).toMatchObject({ status: 'locked' });
    });

    it('of many concurrent locks of one object, exactly one is locked', async () => {
      const { store, order } = await open();
      const keys = await Promise.all(Array.from({ length: 20 }, (_, i) => claimed(store, `o${i % 3}`)));
      const results = await Promise.all(keys.map((key, i) => order.lock(key, `o${i % 3}`, 'pay_1')));
      expect(results.filter((r) => r.status === 'locked')).toHaveLength(1);
      expect(results.filter((r) => r.status === 'busy')).toHaveLength(19);
    });

    it('complete marks the event done, raises the rank, and frees the lock in one step', async () => {
      const { store, order } = await open();
      const first = await claimed(store);
      await order.lock(first, 'a', 'pay_1');
      expect(await order.complete(first, 'a', 'pay_1', 20)).toBe(true);
      expect(await store.get(first)).toMatchObject({ state: 'done' });
      expect(
        await store.claim(first, { owner: 'b', leaseMs: LONG, payload: '{}', businessId: business }),
      ).toEqual({ status: 'duplicate', state: 'done' });
      const next = await claimed(store, 'b');
      expect(await order.lock(next, 'b', 'pay_1')).toEqual({ status: 'locked', rank: 20 });
    });

    it('never lowers the rank; an undefined rank leaves it', async () => {
      const { store, order } = await open();
      for (const [rank, expected] of [
        [20, 20],
        [10, 20],
        [undefined, 20],
        [30, 30],
      ] as const) {
        const key = await claimed(store);
        expect(await order.lock(key, 'a', 'pay_1')).toMatchObject({ status: 'locked' });
        expect(await order.complete(key, 'a', 'pay_1', rank)).toBe(true);
        const probe = await claimed(store);
        expect(await order.lock(probe, 'a', 'pay_1')).toEqual({ status: 'locked', rank: expected });
        await store.complete(probe, 'a');
      }
    });

    it('keeps ranks apart by object and by business', async () => {
      const { store, order } = await open();
      const key = await claimed(store);
      await order.lock(key, 'a', 'pay_1');
      await order.complete(key, 'a', 'pay_1', 20);
      const [otherObject, otherBusiness] = [
        await claimed(store),
        await claimed(store, 'a', LONG, randomUUID()),
      ];
      expect(await order.lock(otherObject, 'a', 'pay_2')).toEqual({ status: 'locked', rank: undefined });
      expect(await order.lock(otherBusiness, 'a', 'pay_1')).toEqual({ status: 'locked', rank: undefined });
    });

    it("complete by an owner that lost the event changes nothing and keeps the holder's lock", async () => {
      const { store, order } = await open();
      const key = await claimed(store);
      await order.lock(key, 'a', 'pay_1');
      expect(await order.complete(key, 'b', 'pay_1', 50)).toBe(false);
      expect(await store.get(key)).toMatchObject({ state: 'processing', owner: 'a' });
      const other = await claimed(store, 'b');
      expect(await order.lock(other, 'b', 'pay_1')).toEqual({ status: 'busy' });
      await order.complete(key, 'a', 'pay_1', undefined);
      expect(await order.lock(other, 'b', 'pay_1')).toEqual({ status: 'locked', rank: undefined });
    });

    it('a failed event frees the lock and raises no rank', async () => {
      const { store, order } = await open();
      const key = await claimed(store);
      await order.lock(key, 'a', 'pay_1');
      expect(await store.fail(key, 'a', 'Error: boom')).toBe(true);
      const other = await claimed(store, 'b');
      expect(await order.lock(other, 'b', 'pay_1')).toEqual({ status: 'locked', rank: undefined });
    });

    it('a new claim of the holder does not inherit its lock: after a failure and a redelivery', async () => {
      const { store, order } = await open();
      const first = await claimed(store);
      await order.lock(first, 'a', 'pay_1');
      await store.fail(first, 'a', 'Error: boom');
      expect(
        (await store.claim(first, { owner: 'a', leaseMs: LONG, payload: '{}', businessId: business })).status,
      ).toBe('claimed');
      // Processing again, under the same owner: yet another event takes the lock, and the
      // redelivered one waits for it like any other.
      const other = await claimed(store);
      expect(await order.lock(other, 'a', 'pay_1')).toEqual({ status: 'locked', rank: undefined });
      expect(await order.lock(first, 'a', 'pay_1')).toEqual({ status: 'busy' });
      await order.complete(other, 'a', 'pay_1', 10);
      expect(await order.lock(first, 'a', 'pay_1')).toEqual({ status: 'locked', rank: 10 });
    });

    it('a new claim of the holder does not inherit its lock: after a recovery', async () => {
      const { store, order } = await open();
      const first = await claimed(store, 'dead', 50);
      await order.lock(first, 'dead', 'pay_1');
      await wait(100);
      expect((await store.recover('r', LONG, 10)).map((event) => event.key)).toContain(first);
      const other = await claimed(store, 'r');
      expect(await order.lock(other, 'r', 'pay_1')).toEqual({ status: 'locked', rank: undefined });
      expect(await order.lock(first, 'r', 'pay_1')).toEqual({ status: 'busy' });
    });

    it("a holder's lapsed lease frees the lock; a renewed one keeps it", async () => {
      const { store, order } = await open();
      const dead = await claimed(store, 'dead', 50);
      const alive = await claimed(store, 'alive', 50);
      await order.lock(dead, 'dead', 'pay_1');
      await order.lock(alive, 'alive', 'pay_2');
      expect(await store.renew(alive, 'alive', LONG)).toBe(true);
      await wait(100);
      const [a, b] = [await claimed(store, 'b'), await claimed(store, 'b')];
      expect(await order.lock(a, 'b', 'pay_1')).toEqual({ status: 'locked', rank: undefined });
      expect(await order.lock(b, 'b', 'pay_2')).toEqual({ status: 'busy' });
      // The dead holder, recovered by another owner, waits for the lock like any other event.
      const recovered = await store.recover('r', LONG, 10);
      expect(recovered.map((event) => event.key)).toContain(dead);
      expect(await order.lock(dead, 'r', 'pay_1')).toEqual({ status: 'busy' });
    });
  });
}
