import { describe, expect, it } from 'vitest';
import {
  createMemoryStore,
  createReceiver,
  DEFAULT_RETRY,
  type HandlerContext,
  type IdempotencyStore,
  type Logger,
  type ReceiverRequest,
  retryDelay,
} from '../src/index.js';
import { createTestEvent, signEvent } from '../src/testing/index.js';

const BIZ = 'b2c1d0e9-1f2a-4b3c-8d4e-5f6a7b8c9d0e';
const request = (body: unknown, extra: Partial<ReceiverRequest> = {}): ReceiverRequest => ({
  method: 'POST',
  contentType: 'application/json; charset=utf-8',
  remoteAddress: '127.0.0.1',
  rawBody: JSON.stringify(body),
  ...extra,
});

describe('createReceiver options', () => {
  it.each([
    [{ businessIds: [], allowAnyIp: true }, /businessIds/],
    [{ businessIds: [''], allowAnyIp: true }, /businessIds/],
    [{ businessIds: ['b'] }, /allowedIps.*allowAnyIp/],
    [{ businessIds: ['b'], allowedIps: ['127.1'] }, /"127.1"/],
    [{ businessIds: ['b'], allowedIps: ['1.2.3.4'], allowAnyIp: true }, /not both/],
    [{ businessIds: ['b'], allowAnyIp: true, trustedProxies: ['10.0.0.0/33'] }, /10.0.0.0\/33/],
    [{ businessIds: ['b'], allowAnyIp: true, maxBodyBytes: -1 }, /maxBodyBytes/],
    [{ businessIds: ['b'], allowAnyIp: true, concurrency: 0 }, /concurrency/],
    [{ businessIds: ['b'], allowAnyIp: true, canonicalization: 'rfc' }, /canonicalization/],
    [{ businessIds: ['b'], allowAnyIp: true, retry: { attempts: 0 } }, /retry.attempts/],
  ])('refuses %j with a TypeError naming the value', (options, message) => {
    expect(() => createReceiver(options as never)).toThrow(TypeError);
    expect(() => createReceiver(options as never)).toThrow(message);
  });

  it('takes a single business id as a string', () => {
    expect(() => createReceiver({ businessIds: BIZ, allowAnyIp: true, recoveryIntervalMs: 0 })).not.toThrow();
  });
});

describe('receiver.handle', () => {
  it('answers 503 store_unavailable, and records nothing, when the store fails', async () => {
    const broken: IdempotencyStore = {
      ...createMemoryStore(),
      claim: () => Promise.reject(new Error('connection refused')),
    };
    const receiver = createReceiver({
      businessIds: [BIZ],
      allowAnyIp: true,
      store: broken,
      recoveryIntervalMs: 0,
    });
    const errors: string[] = [];
    receiver.onError((_e, info) => errors.push(info.phase));
    const result = await receiver.handle(request(createTestEvent('payment.session.created', BIZ)));
    expect(result.status).toBe(503);
    expect(result.body).toMatchObject({ error: { code: 'store_unavailable' } });
    expect(result.afterResponse).toBeUndefined();
    expect(errors).toEqual(['store']);
  });

  it('accepts a parsed body with jcs and warns once that the raw body gives more protection', async () => {
    const warnings: string[] = [];
    const logger: Logger = { debug() {}, info() {}, error() {}, warn: (_o, msg) => warnings.push(msg ?? '') };
    const receiver = createReceiver({ businessIds: [BIZ], allowAnyIp: true, logger, recoveryIntervalMs: 0 });
    for (let i = 0; i < 2; i++) {
      const event = createTestEvent('payment.session.created', BIZ);
      const result = await receiver.handle(request(event, { rawBody: undefined, parsedBody: event }));
      expect(result.status).toBe(200);
    }
    expect(warnings.filter((w) => /body parser/.test(w))).toHaveLength(1);
  });

  it('reads the body only once the cheap checks pass', async () => {
    let reads = 0;
    const readBody = async () => {
      reads++;
      return JSON.stringify(createTestEvent('payment.session.created', BIZ));
    };
    const receiver = createReceiver({ businessIds: [BIZ], allowedIps: ['10.0.0.1'], recoveryIntervalMs: 0 });
    const refused = await receiver.handle({
      method: 'POST',
      contentType: 'application/json',
      remoteAddress: '127.0.0.1',
      readBody,
    });
    expect(refused.status).toBe(403);
    expect(reads).toBe(0);
  });

  it('keys events by business id and lower-cased checksum', async () => {
    const receiver = createReceiver({ businessIds: [BIZ], allowAnyIp: true, recoveryIntervalMs: 0 });
    const event = createTestEvent('payment.session.created', BIZ);
    const keys: string[] = [];
    receiver.onAny((_e, ctx) => {
      keys.push(ctx.key);
    });
    const first = await receiver.handle(request(event));
    first.afterResponse?.();
    const upper = await receiver.handle(request({ ...event, checksum: event.checksum.toUpperCase() }));
    expect(upper.body).toEqual({ received: true, duplicate: true });
    await receiver.idle();
    expect(keys).toEqual([`${BIZ}:${event.checksum}`]);
  });

  it('hands an authentic known event with invalid data to onUnrecognized only', async () => {
    const receiver = createReceiver({ businessIds: [BIZ], allowAnyIp: true, recoveryIntervalMs: 0 });
    const calls: string[] = [];
    receiver.on('payment.session.created', () => {
      calls.push('typed');
    });
    receiver.onAny(() => {
      calls.push('any');
    });
    receiver.onUnrecognized(({ reason, issues }) => {
      calls.push(`${reason}:${issues.map((i) => i.path).join(',')}`);
    });
    const payment = { ...createTestEvent('payment.session.created', BIZ).data, amount: 'lots' };
    const result = await receiver.handle(request(signEvent('payment.session.created', payment, BIZ)));
    expect(result.status).toBe(200);
    result.afterResponse?.();
    await receiver.idle();
    expect(calls).toEqual(['invalid_data:/data/amount']);
  });

  it('recovers an event whose owner died, and processes it', async () => {
    const store = createMemoryStore();
    const event = createTestEvent('payment.session.succeeded', BIZ);
    const key = `${BIZ}:${event.checksum}`;
    await store.claim(key, {
      owner: 'dead-instance',
      leaseMs: 1,
      payload: JSON.stringify(event),
      businessId: BIZ,
    });
    await new Promise((resolve) => setTimeout(resolve, 5));
    const receiver = createReceiver({ businessIds: [BIZ], allowAnyIp: true, store, recoveryIntervalMs: 0 });
    const seen: unknown[] = [];
    receiver.on('payment.session.succeeded', (e) => {
      seen.push(e);
    });
    expect(await receiver.recover()).toBe(1);
    await receiver.idle();
    expect(seen).toEqual([event]);
    expect(await store.get(key)).toMatchObject({ state: 'done' });
  });

  it("takes the store's lease when it sets none itself", async () => {
    const store = createMemoryStore({ leaseMs: 5 });
    const receiver = createReceiver({ businessIds: [BIZ], allowAnyIp: true, store, recoveryIntervalMs: 0 });
    receiver.on('payment.session.created', () => new Promise((resolve) => setTimeout(resolve, 1)));
    const event = createTestEvent('payment.session.created', BIZ);
    await receiver.handle(request(event));
    const record = await store.get(`${BIZ}:${event.checksum}`);
    expect((record?.leaseUntil ?? 0) - (record?.updatedAt ?? 0)).toBe(5);
  });

  it('renews the lease while a slow handler runs, so no other instance takes the event', async () => {
    const store = createMemoryStore();
    const receiver = createReceiver({
      businessIds: [BIZ],
      allowAnyIp: true,
      store,
      leaseMs: 30,
      recoveryIntervalMs: 0,
    });
    let release: () => void = () => {};
    receiver.on('payment.session.created', () => new Promise<void>((resolve) => (release = resolve)));
    const event = createTestEvent('payment.session.created', BIZ);
    (await receiver.handle(request(event))).afterResponse?.();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await store.recover('other-instance', 1000, 10)).toEqual([]);
    release();
    await receiver.idle();
    expect(await store.get(`${BIZ}:${event.checksum}`)).toMatchObject({ state: 'done' });
  });
});

describe('retryDelay', () => {
  it('grows exponentially, is capped, and jitters between half and all of the delay', () => {
    const options = { ...DEFAULT_RETRY, minDelayMs: 100, maxDelayMs: 1000, factor: 2 };
    expect([1, 2, 3, 4, 5].map((n) => retryDelay(n, options, () => 1))).toEqual([100, 200, 400, 800, 1000]);
    expect([1, 2, 3, 4, 5].map((n) => retryDelay(n, options, () => 0))).toEqual([50, 100, 200, 400, 500]);
    expect(retryDelay(2, options, () => 0.5)).toBe(150);
  });
});

describe('handler context', () => {
  it('aborts the signal a handler holds when its timeout passes', async () => {
    const receiver = createReceiver({
      businessIds: [BIZ],
      allowAnyIp: true,
      recoveryIntervalMs: 0,
      handlerTimeoutMs: 20,
      retry: { attempts: 1 },
    });
    let reason: unknown;
    receiver.on('payment.session.created', (_event, { signal }) => {
      return new Promise<void>((resolve) => {
        signal.addEventListener('abort', () => {
          reason = signal.reason;
          resolve();
        });
      });
    });
    const result = await receiver.handle(request(createTestEvent('payment.session.created', BIZ)));
    result.afterResponse?.();
    await receiver.idle();
    expect((reason as { code?: string }).code).toBe('handler_timeout');
  });
});

describe('work queue', () => {
  it('runs at most `concurrency` events at once, and idle() waits for every one', async () => {
    const receiver = createReceiver({
      businessIds: [BIZ],
      allowAnyIp: true,
      recoveryIntervalMs: 0,
      concurrency: 2,
    });
    let running = 0;
    let most = 0;
    let done = 0;
    receiver.onAny(async () => {
      running++;
      most = Math.max(most, running);
      await new Promise((resolve) => setTimeout(resolve, 5));
      running--;
      done++;
    });
    for (let i = 0; i < 6; i++) {
      const result = await receiver.handle(request(createTestEvent('payment.session.created', BIZ)));
      result.afterResponse?.();
    }
    await receiver.idle();
    expect(done).toBe(6);
    expect(most).toBe(2);
  });

  it('idle() resolves at once with nothing accepted, and waits for events not started yet', async () => {
    const receiver = createReceiver({ businessIds: [BIZ], allowAnyIp: true, recoveryIntervalMs: 0 });
    await receiver.idle();
    const seen: number[] = [];
    receiver.onAny((_event, context) => {
      seen.push(context.attempt);
    });
    const result = await receiver.handle(request(createTestEvent('payment.session.created', BIZ)));
    result.afterResponse?.();
    // Workers start in the next check phase: idle() called now must wait for them.
    await receiver.idle();
    expect(seen).toEqual([1]);
  });

  it('hands every handler of an attempt one context: key, business id, attempt, one signal', async () => {
    const receiver = createReceiver({ businessIds: [BIZ], allowAnyIp: true, recoveryIntervalMs: 0 });
    const contexts: HandlerContext[] = [];
    const signals: AbortSignal[] = [];
    receiver.on('payment.session.created', (_event, context) => {
      contexts.push(context);
      signals.push(context.signal, context.signal);
    });
    receiver.onAny((_event, context) => {
      contexts.push(context);
    });
    const event = createTestEvent('payment.session.created', BIZ);
    (await receiver.handle(request(event))).afterResponse?.();
    await receiver.idle();
    expect(contexts).toHaveLength(2);
    expect(contexts[0]).toBe(contexts[1]);
    expect(contexts[0]).toMatchObject({ key: `${BIZ}:${event.checksum}`, businessId: BIZ, attempt: 1 });
    expect(signals[0]).toBe(signals[1]);
    expect(signals[0]?.aborted).toBe(false);
  });
});
