// The receiver's promises tried as an attacker would: concurrent copies of one event, close() at
// every awkward moment, a stuck handler under a flood, and events that no handler takes.
import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  type ClaimRequest,
  type ClaimResult,
  createMemoryStore,
  createReceiver,
  encodeEnvelope,
  type IdempotencyStore,
  type Logger,
  lexicalCanonicalJson,
  type Receiver,
  type ReceiverOptions,
  type ReceiverRequest,
  type ReceiverResult,
  silentLogger,
} from '../src/index.js';
import { createTestEvent, signEvent } from '../src/testing/index.js';

const BIZ = '6d1c8a52-3f0e-4b7a-9c2d-8e5f1a0b3c4d';
const request = (body: unknown): ReceiverRequest => ({
  method: 'POST',
  contentType: 'application/json',
  remoteAddress: '127.0.0.1',
  rawBody: JSON.stringify(body),
});
const tick = () => new Promise((resolve) => setImmediate(resolve));

/** A receiver over `store` that counts handler runs per checksum. */
function counting(options: Partial<ReceiverOptions> = {}) {
  const runs = new Map<string, number>();
  const receiver = createReceiver({
    businessIds: [BIZ],
    allowAnyIp: true,
    recoveryIntervalMs: 0,
    logger: silentLogger,
    ...options,
  });
  receiver.onAny((event) => {
    runs.set(event.checksum, (runs.get(event.checksum) ?? 0) + 1);
  });
  return { receiver, runs };
}

/** Hands the result to the "framework": the response is written, then the work starts. */
function respond(result: ReceiverResult): ReceiverResult {
  result.afterResponse?.();
  return result;
}

/**
 * A memory store whose claims wait until `release()` (or a per-claim delay), so that requests
 * and close() can be interleaved at will.
 */
function slowStore(delay: (n: number) => number | 'gate' = () => 'gate') {
  const inner = createMemoryStore();
  const gates: (() => void)[] = [];
  let claims = 0;
  const store: IdempotencyStore = {
    ...inner,
    async claim(key: string, claim: ClaimRequest): Promise<ClaimResult> {
      const d = delay(claims++);
      if (d === 'gate') await new Promise<void>((resolve) => gates.push(resolve));
      else await new Promise((resolve) => setTimeout(resolve, d));
      return inner.claim(key, claim);
    },
  };
  return {
    store,
    inner,
    get waiting() {
      return gates.length;
    },
    release() {
      for (const open of gates.splice(0)) open();
    },
  };
}

describe('exactly once across concurrent copies', () => {
  it.each([2, 20, 200])('%i concurrent copies on one instance run the handler once', async (n) => {
    const { receiver, runs } = counting();
    const event = createTestEvent('payment.session.succeeded', BIZ);
    const results = await Promise.all(Array.from({ length: n }, () => receiver.handle(request(event))));
    for (const result of results) respond(result);
    await receiver.idle();
    expect(results.every((r) => r.status === 200)).toBe(true);
    expect(results.filter((r) => r.body.duplicate !== true)).toHaveLength(1);
    expect(runs.get(event.checksum)).toBe(1);
  });

  it('copies that arrive while the first claim is undecided wait for it, and share its 503', async () => {
    const slow = slowStore((n) => (n === 0 ? 'gate' : 0));
    const { receiver, runs } = counting({
      store: {
        ...slow.store,
        // The first claim fails once it is let go: the store never recorded the event.
        claim: async (key, claim) => {
          await slow.store.claim(key, claim);
          throw new Error('connection reset');
        },
      },
      logger: silentLogger,
    });
    receiver.onError(() => {});
    const event = createTestEvent('payment.session.created', BIZ);
    const first = receiver.handle(request(event));
    await tick();
    const copies = Array.from({ length: 5 }, () => receiver.handle(request(event)));
    await tick();
    slow.release();
    const results = await Promise.all([first, ...copies]);
    // None may be acknowledged: nothing was recorded, so each must be sent again.
    expect(results.map((r) => r.status)).toEqual([503, 503, 503, 503, 503, 503]);
    await receiver.idle();
    expect(runs.size).toBe(0);
  });

  it("a claim that reached the store after this instance answered 503 is taken back by the sender's retry", async () => {
    const inner = createMemoryStore();
    let late = true;
    const store: IdempotencyStore = {
      ...inner,
      async claim(key, claim) {
        const result = await inner.claim(key, claim);
        if (late) {
          // The command timed out on this side, yet the store ran it.
          late = false;
          throw new Error('Redis did not answer claim within 1000 ms.');
        }
        return result;
      },
    };
    const { receiver, runs } = counting({ store });
    receiver.onError(() => {});
    const event = createTestEvent('payment.session.succeeded', BIZ);
    expect((await receiver.handle(request(event))).status).toBe(503);
    const retry = respond(await receiver.handle(request(event)));
    expect(retry.status).toBe(200);
    expect(retry.body).toEqual({ received: true });
    expect(respond(await receiver.handle(request(event))).body).toEqual({ received: true, duplicate: true });
    await receiver.idle();
    expect(runs.get(event.checksum)).toBe(1);
    // Another instance never takes back what is not its own.
    const other = counting({ store: inner });
    const second = createTestEvent('payment.session.created', BIZ);
    await inner.claim(`${BIZ}:${second.checksum}`, {
      owner: receiver.instanceId,
      leaseMs: 60_000,
      payload: JSON.stringify(second),
      businessId: BIZ,
    });
    expect((await other.receiver.handle(request(second))).body).toEqual({ received: true, duplicate: true });
  });

  it('several instances on one store: concurrent copies spread over them run the handler once', async () => {
    const store = createMemoryStore();
    const instances = [counting({ store }), counting({ store }), counting({ store })];
    const events = Array.from({ length: 10 }, () => createTestEvent('payment.session.succeeded', BIZ));
    const results = await Promise.all(
      events.flatMap((event) =>
        Array.from({ length: 50 }, (_, i) =>
          (instances[i % 3] as (typeof instances)[number]).receiver.handle(request(event)),
        ),
      ),
    );
    for (const result of results) respond(result);
    await Promise.all(instances.map(({ receiver }) => receiver.idle()));
    for (const event of events) {
      const total = instances.reduce((sum, { runs }) => sum + (runs.get(event.checksum) ?? 0), 0);
      expect(total).toBe(1);
    }
    expect(results.filter((r) => r.body.duplicate !== true)).toHaveLength(events.length);
  });

  it('a copy that arrives while the event runs, or after it is done, is a duplicate', async () => {
    const { receiver, runs } = counting();
    let release: () => void = () => {};
    receiver.on('payment.session.created', () => new Promise<void>((resolve) => (release = resolve)));
    const event = createTestEvent('payment.session.created', BIZ);
    respond(await receiver.handle(request(event)));
    await tick();
    expect((await receiver.handle(request(event))).body).toEqual({ received: true, duplicate: true });
    release();
    await receiver.idle();
    expect((await receiver.handle(request(event))).body).toEqual({ received: true, duplicate: true });
    expect(runs.get(event.checksum)).toBe(1);
  });
});

describe('leases of queued events', () => {
  it('are renewed while the events wait in the queue, so no other instance takes them over', async () => {
    const store = createMemoryStore();
    const busy = counting({ store, concurrency: 1, leaseMs: 300 });
    busy.receiver.onAny(() => new Promise((resolve) => setTimeout(resolve, 100)));
    // A second instance looking for lapsed leases all the while.
    const rescuer = counting({ store, recoveryIntervalMs: 10, leaseMs: 300 });
    const events = Array.from({ length: 8 }, () => createTestEvent('payment.session.created', BIZ));
    for (const event of events) respond(await busy.receiver.handle(request(event)));
    await busy.receiver.idle();
    await rescuer.receiver.close();
    for (const event of events) {
      expect((busy.runs.get(event.checksum) ?? 0) + (rescuer.runs.get(event.checksum) ?? 0)).toBe(1);
    }
    expect(rescuer.runs.size).toBe(0);
  });
  it('a lease lost between local retries stops them: the instance that took the event over runs it, and no false dead letter is raised', async () => {
    const shared = createMemoryStore();
    // The first instance is cut off from the store's renewals while its first attempt runs: its
    // lease lapses and the second instance recovers and runs the event. Then it reaches the store
    // again and learns, at its next renewal, that the event is another's.
    let cutOff = false;
    const cutStore: IdempotencyStore = {
      ...shared,
      claim: (key, request) => shared.claim(key, request),
      renew: async (key, owner, leaseMs) => {
        if (cutOff) throw new Error('store unreachable');
        return shared.renew(key, owner, leaseMs);
      },
    };
    const first = counting({
      store: cutStore,
      leaseMs: 150,
      retry: { attempts: 6, minDelayMs: 1000, maxDelayMs: 1000, factor: 1 },
    });
    const second = counting({ store: shared, leaseMs: 150, recoveryIntervalMs: 20 });
    const event = createTestEvent('payment.session.succeeded', BIZ);
    const key = `${BIZ}:${event.checksum}`;
    let firstRuns = 0;
    const letters: unknown[] = [];
    first.receiver.onAny(async () => {
      firstRuns++;
      if (firstRuns === 1) {
        cutOff = true;
        while ((await shared.get(key))?.state !== 'done') await new Promise((r) => setTimeout(r, 10));
        cutOff = false;
      }
      throw new Error('handler fails on the first instance');
    });
    first.receiver.onDeadLetter((letter) => {
      letters.push(letter);
    });
    respond(await first.receiver.handle(request(event)));
    await first.receiver.idle();
    await second.receiver.close();
    await first.receiver.close();
    expect(second.runs.get(event.checksum)).toBe(1);
    // The renewal after the first failure found another owner: no second attempt here (the retry
    // delay, a second, leaves the renewals, every 50 ms, time to find it).
    expect(firstRuns).toBe(1);
    expect(letters).toEqual([]);
    expect(await shared.get(key)).toMatchObject({ state: 'done' });
  });
});

describe('close() finishes what was acknowledged', () => {
  it('a request whose claim is in flight when close() is called is answered 200 and processed before close() resolves', async () => {
    const slow = slowStore();
    const { receiver, runs } = counting({ store: slow.store });
    const event = createTestEvent('payment.session.succeeded', BIZ);
    const pending = receiver.handle(request(event));
    while (slow.waiting === 0) await tick();
    let closed = false;
    const closing = receiver.close().then(() => {
      closed = true;
    });
    await tick();
    expect(closed).toBe(false);
    slow.release();
    const result = await pending;
    expect(result.status).toBe(200);
    // The adapter has not written the response yet: close() must not wait for it, nor drop it.
    await closing;
    expect(runs.get(event.checksum)).toBe(1);
    expect(await slow.inner.get(`${BIZ}:${event.checksum}`)).toMatchObject({ state: 'done' });
    // The adapter's late afterResponse does nothing more.
    result.afterResponse?.();
    await receiver.idle();
    expect(runs.get(event.checksum)).toBe(1);
  });

  it('a request still reading its body when close() is called is refused, not acknowledged', async () => {
    const { receiver, runs } = counting();
    let deliver: (body: string) => void = () => {};
    const event = createTestEvent('payment.session.created', BIZ);
    const pending = receiver.handle({
      method: 'POST',
      contentType: 'application/json',
      remoteAddress: '127.0.0.1',
      readBody: () => new Promise<string>((resolve) => (deliver = resolve)),
    });
    await tick();
    await receiver.close();
    deliver(JSON.stringify(event));
    const result = await pending;
    expect(result.status).toBe(503);
    expect(result.body).toMatchObject({ error: { code: 'shutting_down' } });
    expect(runs.size).toBe(0);
  });

  it('under any interleaving of requests, claim delays and close(), every 200 is processed before close() resolves', async () => {
    // A seeded generator, so that a failure can be replayed.
    let seed = 0x2f6e2b1;
    const random = () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed / 0x7fffffff;
    };
    for (let round = 0; round < 30; round++) {
      const slow = slowStore(() => Math.floor(random() * 4));
      const { receiver, runs } = counting({ store: slow.store, concurrency: 3 });
      const events = Array.from({ length: 12 }, () => createTestEvent('payment.session.created', BIZ));
      const sent = events.map(async (event, i) => {
        await new Promise((resolve) => setTimeout(resolve, Math.floor(random() * 6)));
        const result = await receiver.handle(request(event));
        // Some adapters write the response late, or never call afterResponse (client gone).
        if (i % 4 !== 0) setTimeout(() => result.afterResponse?.(), Math.floor(random() * 4));
        return { event, result };
      });
      await new Promise((resolve) => setTimeout(resolve, Math.floor(random() * 6)));
      await receiver.close();
      const processedAtClose = new Map(runs);
      const answers = await Promise.all(sent);
      for (const { event, result } of answers) {
        const acknowledged = result.status === 200 && result.body.duplicate !== true;
        expect(processedAtClose.get(event.checksum) ?? 0, `round ${round}`).toBe(acknowledged ? 1 : 0);
        if (result.status !== 200) expect(result.body).toMatchObject({ error: { code: 'shutting_down' } });
      }
    }
  });
});

describe('bounded memory', () => {
  it('past maxQueuedEvents a stuck receiver answers 503 queue_full with Retry-After and records nothing', async () => {
    const store = createMemoryStore();
    const { receiver, runs } = counting({ store, maxQueuedEvents: 25, concurrency: 2 });
    let release: () => void = () => {};
    const stuck = new Promise<void>((resolve) => (release = resolve));
    receiver.onAny(() => stuck);
    const events = Array.from({ length: 40 }, () => createTestEvent('payment.session.created', BIZ));
    const results: ReceiverResult[] = [];
    for (const event of events) results.push(respond(await receiver.handle(request(event))));
    expect(results.slice(0, 25).every((r) => r.status === 200)).toBe(true);
    for (const [i, result] of results.slice(25).entries()) {
      expect(result.status).toBe(503);
      expect(result.body).toMatchObject({ error: { code: 'queue_full' } });
      expect(Number(result.headers['retry-after'])).toBeGreaterThan(0);
      expect(await store.get(`${BIZ}:${(events[25 + i] as { checksum: string }).checksum}`)).toBeUndefined();
    }
    release();
    await receiver.idle();
    // The sender's retry brings the refused events back, and now they are taken.
    for (const event of events.slice(25)) respond(await receiver.handle(request(event)));
    await receiver.idle();
    expect(events.every((event) => runs.get(event.checksum) === 1)).toBe(true);
  });

  it('bounds the body bytes held, and takes one event alone whatever its size', async () => {
    const { receiver } = counting({ maxQueuedBytes: 6_000, concurrency: 1 });
    let release: () => void = () => {};
    const stuck = new Promise<void>((resolve) => (release = resolve));
    receiver.onAny(() => stuck);
    const big = (n: number) =>
      signEvent(
        'payment.session.created',
        { ...createTestEvent('payment.session.created', BIZ).data, pad: 'x'.repeat(n) },
        BIZ,
      );
    expect(respond(await receiver.handle(request(big(8_000)))).status).toBe(200);
    const refused = await receiver.handle(request(big(10)));
    expect(refused.status).toBe(503);
    expect(refused.body).toMatchObject({ error: { code: 'queue_full' } });
    release();
    await receiver.idle();
    expect(respond(await receiver.handle(request(big(10)))).status).toBe(200);
    await receiver.idle();
  });

  it('concurrent floods never hold more than the bound, claims in flight included', async () => {
    const slow = slowStore();
    const { receiver } = counting({ store: slow.store, maxQueuedEvents: 10 });
    const results = Array.from({ length: 50 }, () =>
      receiver.handle(request(createTestEvent('payment.session.created', BIZ))),
    );
    while (slow.waiting < 10) await tick();
    await tick();
    expect(slow.waiting).toBe(10);
    slow.release();
    const statuses = (await Promise.all(results)).map((r) => respond(r).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(10);
    expect(statuses.filter((s) => s === 503)).toHaveLength(40);
    await receiver.idle();
  });

  it('recovery claims no more lapsed events than the room left under the bound', async () => {
    const store = createMemoryStore();
    const events = Array.from({ length: 5 }, () => createTestEvent('payment.session.created', BIZ));
    for (const event of events) {
      await store.claim(`${BIZ}:${event.checksum}`, {
        owner: 'dead-instance',
        leaseMs: 1,
        payload: JSON.stringify(event),
        businessId: BIZ,
      });
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
    const { receiver, runs } = counting({ store, maxQueuedEvents: 3, concurrency: 1 });
    let release: () => void = () => {};
    const stuck = new Promise<void>((resolve) => (release = resolve));
    receiver.onAny(() => stuck);
    expect(await receiver.recover()).toBe(3);
    // Full: nothing more is claimed, and the two left stay lapsed for whoever has room.
    expect(await receiver.recover()).toBe(0);
    expect((await store.recover('other-instance', 60_000, 10)).length).toBe(2);
    release();
    await receiver.idle();
    expect(runs.size).toBe(3);
  });

  it('replay refuses with queue_full when the queue is full, and shutting_down once closed', async () => {
    const store = createMemoryStore();
    const { receiver } = counting({ store, maxQueuedEvents: 1, retry: { attempts: 1 } });
    let fail = true;
    receiver.onAny(() => {
      if (fail) throw new Error('down');
    });
    const failed = createTestEvent('payment.session.failed', BIZ);
    respond(await receiver.handle(request(failed)));
    await receiver.idle();
    const key = `${BIZ}:${failed.checksum}`;
    expect(await store.get(key)).toMatchObject({ state: 'failed' });
    let release: () => void = () => {};
    const stuck = new Promise<void>((resolve) => (release = resolve));
    receiver.on('payment.session.created', () => stuck);
    fail = false;
    respond(await receiver.handle(request(createTestEvent('payment.session.created', BIZ))));
    await expect(receiver.replay(key)).rejects.toMatchObject({ code: 'queue_full' });
    release();
    await receiver.idle();
    await receiver.close();
    await expect(receiver.replay(key)).rejects.toMatchObject({ code: 'shutting_down' });
    expect(await store.get(key)).toMatchObject({ state: 'failed' });
  });

  it('validates the bounds at creation', () => {
    expect(() => createReceiver({ businessIds: [BIZ], allowAnyIp: true, maxQueuedEvents: 0 })).toThrow(
      /maxQueuedEvents/,
    );
    expect(() => createReceiver({ businessIds: [BIZ], allowAnyIp: true, maxQueuedBytes: -1 })).toThrow(
      /maxQueuedBytes/,
    );
  });
});

describe('never silent', () => {
  const capture = () => {
    const lines: string[] = [];
    const logger: Logger = { debug() {}, info() {}, error() {}, warn: (_o, msg) => lines.push(msg ?? '') };
    return { lines, logger };
  };

  it('an authentic event that fails the typed schema is logged when nothing takes it', async () => {
    const { lines, logger } = capture();
    const receiver = createReceiver({ businessIds: [BIZ], allowAnyIp: true, recoveryIntervalMs: 0, logger });
    receiver.on('payment.session.created', () => {});
    const data = { ...createTestEvent('payment.session.created', BIZ).data, amount: 2 ** 60 };
    respond(await receiver.handle(request(signEvent('payment.session.created', data, BIZ))));
    await receiver.idle();
    expect(lines.filter((l) => /not handled \(invalid_data\)/.test(l))).toHaveLength(1);
  });

  it('writes warnings to stderr by default', async () => {
    const receiver = createReceiver({ businessIds: [BIZ], allowAnyIp: true, recoveryIntervalMs: 0 });
    const written: string[] = [];
    const write = process.stderr.write;
    process.stderr.write = ((chunk: string) => {
      written.push(String(chunk));
      return true;
    }) as typeof process.stderr.write;
    try {
      respond(await receiver.handle(request(signEvent('payment.session.renamed', { id: 'x' }, BIZ))));
      await receiver.idle();
    } finally {
      process.stderr.write = write;
    }
    expect(written.some((line) => /^WARN .*payment\.session\.renamed.*unknown_event/.test(line))).toBe(true);
  });

  it('stays quiet about an unknown event that onAny takes, and about everything with silentLogger', async () => {
    const { lines, logger } = capture();
    const receiver: Receiver = createReceiver({
      businessIds: [BIZ],
      allowAnyIp: true,
      recoveryIntervalMs: 0,
      logger,
    });
    receiver.onAny(() => {});
    respond(await receiver.handle(request(signEvent('payment.session.renamed', { id: 'x' }, BIZ))));
    await receiver.idle();
    expect(lines.filter((l) => /not handled/.test(l))).toEqual([]);
  });
});

describe('numbers', () => {
  it.each([
    ['beyond 2^53', '9007199254740993'],
    ['2^53', '9007199254740992'],
    ['1E400', '1E400'],
    ['negative', '-100000'],
    ['fractional', '1000.5'],
  ])(
    'an amount that is not a safe integer (%s) goes to onUnrecognized, never to a typed handler',
    async (_name, amount) => {
      const receiver = createReceiver({
        businessIds: [BIZ],
        allowAnyIp: true,
        recoveryIntervalMs: 0,
        logger: silentLogger,
        canonicalization: 'lexical',
      });
      const typed: unknown[] = [];
      const unrecognized: string[] = [];
      receiver.on('payment.session.created', (event) => {
        typed.push(event.data.amount);
      });
      receiver.onUnrecognized(({ reason, issues }) => {
        unrecognized.push(`${reason}:${issues.map((i) => i.path).join(',')}`);
      });
      // Signed over the text as written (lexical), so the checksum holds whatever JSON.parse makes of it.
      const data = createTestEvent('payment.session.created', BIZ).data;
      const dataText = JSON.stringify(data).replace(/"amount":\d+/, `"amount":${amount}`);
      const canonical = lexicalCanonicalJson(dataText);
      const checksum = createHmac('sha256', BIZ).update(`payment.session.created|${canonical}`).digest('hex');
      const body = encodeEnvelope('payment.session.created', dataText, checksum);
      const result = respond(
        await receiver.handle({
          method: 'POST',
          contentType: 'application/json',
          remoteAddress: '::1',
          rawBody: body,
        }),
      );
      expect(result.status).toBe(200);
      await receiver.idle();
      expect(typed).toEqual([]);
      expect(unrecognized).toEqual(['invalid_data:/data/amount']);
    },
  );
});
