// Per-object order on the memory store: the events of one payment one at a time across receivers
// that share the store, stale events kept from the handlers, and the switch that turns it off.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  createMemoryStore,
  createReceiver,
  type IdempotencyStore,
  type KnownEventName,
  type Logger,
  type PayhookEvent,
  type Receiver,
  type ReceiverOptions,
  type StaleEvent,
  silentLogger,
} from '../src/index.js';
import { createTestEvent, signEvent } from '../src/testing/index.js';

const BIZ = '0b8e4f1a-6c2d-4e3f-9a1b-7c5d3e2f1a0b';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function receiverOn(store: IdempotencyStore, options: Partial<ReceiverOptions> = {}): Receiver {
  return createReceiver({
    businessIds: [BIZ],
    allowAnyIp: true,
    recoveryIntervalMs: 0,
    logger: silentLogger,
    store,
    ...options,
  });
}

/** Delivers `event` as a request would, and starts its work once "answered"; returns the status. */
async function deliver(receiver: Receiver, event: unknown): Promise<number> {
  const result = await receiver.handle({
    method: 'POST',
    contentType: 'application/json',
    remoteAddress: '127.0.0.1',
    rawBody: JSON.stringify(event),
  });
  result.afterResponse?.();
  return result.status;
}

const eventOf = (name: KnownEventName, payment: string) => createTestEvent(name, BIZ, { id: payment });

/** A promise and the function that settles it. */
function gate() {
  let open = () => {};
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

describe('per-object order', () => {
  it('hands a created that comes after its succeeded to onStale, counts it and marks it done', async () => {
    const store = createMemoryStore();
    const stale: StaleEvent[] = [];
    const receiver = receiverOn(store, { metrics: { onStale: (s) => stale.push(s) } });
    const handled: string[] = [];
    const staleSeen: PayhookEvent[] = [];
    receiver.on(['payment.session.created', 'payment.session.succeeded'], (event) => {
      handled.push(event.event);
    });
    receiver.onAny((event) => {
      handled.push(`any:${event.event}`);
    });
    receiver.onStale((event) => {
      staleSeen.push(event);
    });
    const payment = randomUUID();
    const succeeded = eventOf('payment.session.succeeded', payment);
    const created = eventOf('payment.session.created', payment);
    expect(await deliver(receiver, succeeded)).toBe(200);
    await receiver.idle();
    expect(await deliver(receiver, created)).toBe(200);
    await receiver.idle();
    expect(handled).toEqual(['payment.session.succeeded', 'any:payment.session.succeeded']);
    expect(staleSeen).toEqual([created]);
    expect(stale).toEqual([{ event: 'payment.session.created', rank: 10, objectRank: 20 }]);
    expect(receiver.stats()).toMatchObject({ stale: 1, held: 0, waitingForOrder: 0 });
    const key = `${BIZ}:${created.checksum}`;
    expect(await store.get(key)).toMatchObject({ state: 'done' });
    // Done is done: a stale event is not replayed, and a copy of it is a duplicate.
    expect(await receiver.replay(key)).toEqual({ status: 'not_failed', state: 'done' });
    expect(await deliver(receiver, created)).toBe(200);
    await receiver.idle();
    expect(staleSeen).toHaveLength(1);
  });

  it('runs events that come in lifecycle order, and those of other payments, as usual', async () => {
    const receiver = receiverOn(createMemoryStore());
    const handled: string[] = [];
    receiver.onAny((event) => {
      handled.push(event.event);
    });
    const payment = randomUUID();
    for (const name of ['payment.session.created', 'payment.session.succeeded'] as const) {
      await deliver(receiver, eventOf(name, payment));
      await receiver.idle();
    }
    // succeeded and failed share a rank: neither makes the other stale.
    await deliver(receiver, eventOf('payment.session.failed', payment));
    await deliver(receiver, eventOf('payment.session.created', randomUUID()));
    await receiver.idle();
    expect(handled).toEqual([
      'payment.session.created',
      'payment.session.succeeded',
      'payment.session.failed',
      'payment.session.created',
    ]);
    expect(receiver.stats().stale).toBe(0);
  });

  it("never runs one payment's handlers at once across receivers, and a waiting event holds no worker", async () => {
    const store = createMemoryStore();
    const receivers = [0, 1, 2].map(() => receiverOn(store, { concurrency: 1 }));
    const payment = randomUUID();
    let running = 0;
    let most = 0;
    const first = gate();
    let otherRan = false;
    for (const receiver of receivers) {
      receiver.onAny(async (event) => {
        if ((event.data as { id: string }).id !== payment) {
          otherRan = true;
          return;
        }
        running++;
        most = Math.max(most, running);
        if (event.event === 'payment.session.created') await first.opened;
        else await sleep(2);
        running--;
      });
    }
    // The created runs on receiver 0 and stays there until the gate opens.
    await deliver(receivers[0] as Receiver, eventOf('payment.session.created', payment));
    while (running === 0) await sleep(1);
    // Events of the same payment on every receiver wait; the one worker of receiver 1 stays free
    // for another payment's event meanwhile.
    const same = Array.from({ length: 9 }, (_, i) =>
      deliver(receivers[i % 3] as Receiver, eventOf('payment.session.succeeded', payment)),
    );
    expect(await Promise.all(same)).toEqual(Array(9).fill(200));
    await deliver(receivers[1] as Receiver, eventOf('payment.session.created', randomUUID()));
    while (!otherRan) await sleep(1);
    const waiting = () => receivers.map((r) => r.stats().waitingForOrder);
    while (waiting().join() !== '0,3,3') await sleep(1);
    expect(running).toBe(1);
    // Receiver 0's one worker runs the created: its copies of the payment's events wait in line.
    expect(receivers[0]?.stats().queued).toBe(3);
    first.open();
    await Promise.all(receivers.map((r) => r.idle()));
    expect(most).toBe(1);
    expect(receivers.reduce((n, r) => n + r.stats().waitingForOrder, 0)).toBe(0);
  });

  it('with order: false, a stale event reaches its handler and events of one payment overlap', async () => {
    const receiver = receiverOn(createMemoryStore(), { order: false, concurrency: 4 });
    const payment = randomUUID();
    const handled: string[] = [];
    let running = 0;
    let most = 0;
    receiver.onAny(async (event) => {
      running++;
      most = Math.max(most, running);
      await sleep(10);
      running--;
      handled.push(event.event);
    });
    const stale: PayhookEvent[] = [];
    receiver.onStale((event) => {
      stale.push(event);
    });
    await deliver(receiver, eventOf('payment.session.succeeded', payment));
    await receiver.idle();
    await Promise.all([
      deliver(receiver, eventOf('payment.session.created', payment)),
      deliver(receiver, eventOf('payment.session.failed', payment)),
    ]);
    await receiver.idle();
    expect(handled.sort()).toEqual([
      'payment.session.created',
      'payment.session.failed',
      'payment.session.succeeded',
    ]);
    expect(most).toBe(2);
    expect(stale).toEqual([]);
    expect(receiver.stats().stale).toBe(0);
  });

  it('orders events payhook does not know with orderKey and orderRank', async () => {
    const receiver = receiverOn(createMemoryStore(), {
      orderKey: (event) =>
        event.event.startsWith('payment.refund.') ? `refund:${(event.data as { id: string }).id}` : undefined,
      orderRank: (event) => ({ 'payment.refund.created': 1, 'payment.refund.settled': 2 })[event.event],
    });
    const handled: string[] = [];
    receiver.onUnknown(['payment.refund.created', 'payment.refund.settled'], (event) => {
      handled.push(event.event);
    });
    const stale: string[] = [];
    receiver.onStale((event) => {
      stale.push(event.event);
    });
    await deliver(receiver, signEvent('payment.refund.settled', { id: 'r_1' }, BIZ));
    await receiver.idle();
    await deliver(receiver, signEvent('payment.refund.created', { id: 'r_1' }, BIZ));
    await deliver(receiver, signEvent('payment.refund.created', { id: 'r_2' }, BIZ));
    await receiver.idle();
    expect(handled).toEqual(['payment.refund.settled', 'payment.refund.created']);
    expect(stale).toEqual(['payment.refund.created']);
  });

  it('replays a failed event that became stale meanwhile to onStale', async () => {
    const store = createMemoryStore();
    const receiver = receiverOn(store, { retry: { attempts: 1 } });
    const payment = randomUUID();
    const created = eventOf('payment.session.created', payment);
    let failing = true;
    const handled: string[] = [];
    receiver.onAny((event) => {
      if (event.event === 'payment.session.created' && failing) throw new Error('down');
      handled.push(event.event);
    });
    const stale: string[] = [];
    receiver.onStale((event) => {
      stale.push(event.event);
    });
    await deliver(receiver, created);
    await receiver.idle();
    const key = `${BIZ}:${created.checksum}`;
    expect(await store.get(key)).toMatchObject({ state: 'failed' });
    await deliver(receiver, eventOf('payment.session.succeeded', payment));
    await receiver.idle();
    failing = false;
    expect(await receiver.replay(key)).toEqual({ status: 'replayed' });
    await receiver.idle();
    expect(handled).toEqual(['payment.session.succeeded']);
    expect(stale).toEqual(['payment.session.created']);
    expect(await store.get(key)).toMatchObject({ state: 'done' });
  });

  it('a failed event delivered again waits its turn behind an event of its payment that came first', async () => {
    const store = createMemoryStore();
    const receiver = receiverOn(store, { retry: { attempts: 1 } });
    const payment = randomUUID();
    const created = eventOf('payment.session.created', payment);
    let failing = true;
    const handled: string[] = [];
    receiver.onAny((event) => {
      if (event.event === 'payment.session.created' && failing) throw new Error('down');
      handled.push(event.event);
    });
    await deliver(receiver, created);
    await receiver.idle();
    failing = false;
    // The failed created held its payment's lock; its new claim does not, so the succeeded that
    // comes first takes its turn, and the created, stale by then, goes to onStale.
    await deliver(receiver, eventOf('payment.session.succeeded', payment));
    await deliver(receiver, created);
    await receiver.idle();
    expect(handled).toEqual(['payment.session.succeeded']);
    expect(receiver.stats()).toMatchObject({ stale: 1, held: 0 });
  });

  it('waits out the lease of a holder that died, then runs', async () => {
    const store = createMemoryStore();
    const payment = randomUUID();
    // An instance that died holding the payment's lock: its event's lease lapses in 150 ms.
    const dead = eventOf('payment.session.created', payment);
    const deadKey = `${BIZ}:${dead.checksum}`;
    await store.claim(deadKey, {
      owner: 'dead',
      leaseMs: 150,
      payload: JSON.stringify(dead),
      businessId: BIZ,
    });
    expect(await store.order?.lock(deadKey, 'dead', payment)).toMatchObject({ status: 'locked' });
    const receiver = receiverOn(store);
    const handled: string[] = [];
    receiver.onAny((event) => {
      handled.push(event.event);
    });
    await deliver(receiver, eventOf('payment.session.succeeded', payment));
    await sleep(50);
    expect(handled).toEqual([]);
    expect(receiver.stats().waitingForOrder).toBe(1);
    await receiver.idle();
    expect(handled).toEqual(['payment.session.succeeded']);
    // The dead instance's event, recovered, is now stale.
    expect(await receiver.recover()).toBe(1);
    await receiver.idle();
    expect(handled).toEqual(['payment.session.succeeded']);
    expect(receiver.stats().stale).toBe(1);
  });

  it('asks again for a lock the store could not give (reported as a store error), and then runs', async () => {
    const inner = createMemoryStore();
    const order = inner.order;
    if (order === undefined) throw new Error('the memory store keeps per-object order');
    let failures = 2;
    const store: IdempotencyStore = {
      ...inner,
      order: {
        ...order,
        lock: async (key, owner, object) => {
          if (failures-- > 0) throw new Error('store down');
          return order.lock(key, owner, object);
        },
      },
    };
    const receiver = receiverOn(store);
    const phases: string[] = [];
    receiver.onError((_error, info) => phases.push(info.phase));
    const handled: string[] = [];
    receiver.onAny((event) => {
      handled.push(event.event);
    });
    await deliver(receiver, eventOf('payment.session.succeeded', randomUUID()));
    await receiver.idle();
    expect(handled).toEqual(['payment.session.succeeded']);
    expect(phases).toEqual(['store', 'store']);
  });

  it('close() waits for events parked behind their payment, and processes them', async () => {
    const receiver = receiverOn(createMemoryStore());
    const payment = randomUUID();
    const first = gate();
    const handled: string[] = [];
    receiver.onAny(async (event) => {
      if (event.event === 'payment.session.created') await first.opened;
      handled.push(event.event);
    });
    await deliver(receiver, eventOf('payment.session.created', payment));
    await deliver(receiver, eventOf('payment.session.succeeded', payment));
    while (receiver.stats().waitingForOrder === 0) await sleep(1);
    const closed = receiver.close();
    first.open();
    await closed;
    expect(handled).toEqual(['payment.session.created', 'payment.session.succeeded']);
  });

  it('runs an event whose orderKey throws unordered, and reports the error', async () => {
    const errors: unknown[] = [];
    const receiver = receiverOn(createMemoryStore(), {
      orderKey: () => {
        throw new Error('bug in orderKey');
      },
    });
    receiver.onError((error) => errors.push(error));
    const handled: string[] = [];
    receiver.onAny((event) => {
      handled.push(event.event);
    });
    await deliver(receiver, eventOf('payment.session.created', randomUUID()));
    await receiver.idle();
    expect(handled).toEqual(['payment.session.created']);
    expect(String(errors[0])).toMatch(/bug in orderKey/);
  });
});

describe('order options', () => {
  it('are checked at creation', () => {
    const store = createMemoryStore();
    expect(() => receiverOn(store, { order: 'yes' as never })).toThrow(/Invalid order: yes/);
    expect(() => receiverOn(store, { orderKey: 'id' as never })).toThrow(/Invalid orderKey/);
    expect(() => receiverOn(store, { order: false, orderRank: () => 1 })).toThrow(/not both/);
    const { order: _, ...unordered } = store;
    expect(() => receiverOn(unordered, { order: true })).toThrow(/does not keep per-object order/);
    expect(() => receiverOn(unordered, { orderKey: () => 'x' })).toThrow(/does not keep per-object order/);
  });

  it('say so once at creation when the store keeps no order and order was not turned off', () => {
    const warnings: string[] = [];
    const logger: Logger = {
      ...silentLogger,
      info: (_fields: unknown, message?: string) => warnings.push(String(message)),
    };
    const { order: _, ...unordered } = createMemoryStore();
    receiverOn(unordered, { logger });
    receiverOn(unordered, { logger, order: false });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/does not keep per-object order.*order: false/);
  });
});
