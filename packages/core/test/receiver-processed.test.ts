// result.processed(), the promise of an accepted event's end that serverless adapters hand to
// waitUntil, and the refusal of a request whose client address no one knows.
import { describe, expect, it } from 'vitest';
import { createReceiver, type ReceiverOptions, type ReceiverRequest, silentLogger } from '../src/index.js';
import { createTestEvent } from '../src/testing/index.js';

const BIZ = '2f6b9c1d-8e3a-4d5b-a7c9-0e1f2a3b4c5d';
const request = (fields: Partial<ReceiverRequest> = {}): ReceiverRequest => ({
  method: 'POST',
  contentType: 'application/json',
  remoteAddress: '127.0.0.1',
  rawBody: JSON.stringify(createTestEvent('payment.session.succeeded', BIZ)),
  ...fields,
});
const receiverWith = (options: Partial<ReceiverOptions> = {}) =>
  createReceiver({
    businessIds: [BIZ],
    allowAnyIp: true,
    recoveryIntervalMs: 0,
    logger: silentLogger,
    retry: { attempts: 2, minDelayMs: 1, maxDelayMs: 1 },
    ...options,
  } as ReceiverOptions);

describe('result.processed()', () => {
  it('resolves done once the handler has finished and the outcome is recorded, not before', async () => {
    const receiver = receiverWith();
    let release: () => void = () => {};
    let finished = false;
    receiver.onAny(async () => {
      await new Promise<void>((resolve) => {
        release = resolve;
      });
      finished = true;
    });
    const result = await receiver.handle(request());
    result.afterResponse?.();
    const processed = result.processed?.();
    let settled = false;
    void processed?.then(() => {
      settled = true;
    });
    while (receiver.stats().running === 0) await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toBe(false);
    release();
    expect(await processed).toEqual({ outcome: 'done' });
    expect(finished).toBe(true);
    expect(receiver.stats().held).toBe(0);
    // Asked after the end: this instance no longer holds the event.
    expect(await result.processed?.()).toEqual({ outcome: 'not_held' });
    await receiver.close();
  });

  it('resolves failed with the last error once every local retry failed', async () => {
    const receiver = receiverWith();
    let runs = 0;
    receiver.onAny(() => {
      runs++;
      throw new Error(`run ${runs} failed`);
    });
    const result = await receiver.handle(request());
    result.afterResponse?.();
    const outcome = await result.processed?.();
    expect(outcome?.outcome).toBe('failed');
    expect((outcome as { error: Error }).error.message).toBe('run 2 failed');
    await receiver.close();
  });

  it('is offered on accepted events only, never on a duplicate or a refusal', async () => {
    const receiver = receiverWith();
    const same = request();
    const first = await receiver.handle(same);
    first.afterResponse?.();
    await first.processed?.();
    const duplicate = await receiver.handle({ ...same });
    expect(duplicate.body).toEqual({ received: true, duplicate: true });
    expect(duplicate.processed).toBeUndefined();
    const refused = await receiver.handle(request({ rawBody: '{' }));
    expect(refused.status).toBe(400);
    expect(refused.processed).toBeUndefined();
    await receiver.close();
  });
});

describe('a client address no one knows', () => {
  it('is refused 500 client_address_unknown under an allow-list, with what to set', async () => {
    const receiver = receiverWith({ allowAnyIp: false, allowedIps: ['127.0.0.1'] });
    for (const remoteAddress of [undefined, '', '  ']) {
      const result = await receiver.handle(request({ remoteAddress }));
      expect(result.status, JSON.stringify(remoteAddress)).toBe(500);
      const { error } = result.body as { error: { code: string; message: string } };
      expect(error.code).toBe('client_address_unknown');
      expect(error.message).toMatch(/getClientAddress.*allowAnyIp/);
      expect(result.afterResponse).toBeUndefined();
    }
    // With trusted proxies and no socket address, X-Forwarded-For alone proves nothing.
    const proxied = receiverWith({
      allowAnyIp: false,
      allowedIps: ['203.0.113.7'],
      trustedProxies: ['10.0.0.0/8'],
    });
    const result = await proxied.handle(request({ remoteAddress: undefined, forwardedFor: '203.0.113.7' }));
    expect((result.body as { error: { code: string } }).error.code).toBe('client_address_unknown');
    await receiver.close();
    await proxied.close();
  });

  it('is no obstacle without an allow-list (allowAnyIp)', async () => {
    const receiver = receiverWith();
    const result = await receiver.handle(request({ remoteAddress: undefined }));
    expect(result.status).toBe(200);
    result.afterResponse?.();
    await receiver.close();
  });
});
