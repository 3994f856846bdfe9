import { afterEach, describe, expect, it } from 'vitest';
import {
  createReceiver,
  ERROR_STATUS,
  type HandledRun,
  type Logger,
  REFUSAL_REASONS,
  type ReceivedOutcome,
  type Receiver,
  type ReceiverMetrics,
  type ReceiverOptions,
  silentLogger,
} from '../src/index.js';
import { createTestEvent, signEvent } from '../src/testing/index.js';
import { serveReceiver } from './fixtures/serve-receiver.js';

const BIZ = 'b2c1d0e9-1f2a-4b3c-8d4e-5f6a7b8c9d0e';
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

/** What a metrics hook was called with, in order. */
function recorder() {
  const calls: [string, unknown][] = [];
  const metrics: ReceiverMetrics = {
    onReceived: (outcome) => void calls.push(['received', outcome]),
    onHandled: (run) => void calls.push(['handled', run]),
    onRetry: (retry) => void calls.push(['retry', retry]),
    onDeadLetter: (letter) => void calls.push(['deadLetter', letter]),
  };
  const of = <T>(kind: string) => calls.filter(([k]) => k === kind).map(([, v]) => v as T);
  return { calls, metrics, of };
}

/** A receiver served over loopback HTTP, closed after the test. */
async function served(options: Partial<ReceiverOptions>): Promise<{ receiver: Receiver; url: string }> {
  const receiver = createReceiver({
    businessIds: [BIZ],
    allowedIps: ['127.0.0.1'],
    recoveryIntervalMs: 0,
    logger: silentLogger,
    ...options,
  });
  const { url, close } = await serveReceiver(receiver);
  closers.push(async () => {
    await close();
    await receiver.close();
  });
  return { receiver, url };
}

const post = (url: string, body: string, headers: Record<string, string> = {}) =>
  fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });

describe('the metrics hook', () => {
  it('counts each request once with its outcome: accepted, duplicate, forged, oversized, wrong method and type', async () => {
    const { metrics, of } = recorder();
    const { receiver, url } = await served({ metrics, maxBodyBytes: 4096 });
    receiver.onAny(() => {});
    const event = JSON.stringify(createTestEvent('payment.session.succeeded', BIZ));
    const forged = JSON.stringify({ ...JSON.parse(event), checksum: 'ab'.repeat(32) });
    const statuses = [
      (await post(url, event)).status,
      (await post(url, event)).status,
      (await post(url, forged)).status,
      (await post(url, `{"event":"x","data":"${'a'.repeat(5000)}","checksum":"00"}`)).status,
      (await post(url, event, { 'content-type': 'text/plain' })).status,
      (await fetch(url, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: event }))
        .status,
      (await post(url, '{"event":')).status,
    ];
    expect(statuses).toEqual([200, 200, 401, 413, 415, 405, 400]);
    expect(of<ReceivedOutcome>('received')).toEqual([
      { outcome: 'accepted', status: 200 },
      { outcome: 'duplicate', status: 200 },
      { outcome: 'refused', reason: 'invalid_checksum', status: 401 },
      { outcome: 'refused', reason: 'payload_too_large', status: 413 },
      { outcome: 'refused', reason: 'unsupported_media_type', status: 415 },
      { outcome: 'refused', reason: 'method_not_allowed', status: 405 },
      { outcome: 'refused', reason: 'malformed_payload', status: 400 },
    ]);
  });

  it('counts an address outside the allow-list, a closing receiver and a full queue by their codes', async () => {
    const elsewhere = recorder();
    const { url } = await served({ metrics: elsewhere.metrics, allowedIps: ['203.0.113.10'] });
    expect((await post(url, JSON.stringify(createTestEvent('payment.session.created', BIZ)))).status).toBe(
      403,
    );
    expect(elsewhere.of('received')).toEqual([{ outcome: 'refused', reason: 'ip_not_allowed', status: 403 }]);

    const { metrics, of } = recorder();
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    const { receiver, url: url2 } = await served({ metrics, maxQueuedEvents: 1 });
    receiver.onAny(() => held);
    expect((await post(url2, JSON.stringify(createTestEvent('payment.session.created', BIZ)))).status).toBe(
      200,
    );
    expect((await post(url2, JSON.stringify(createTestEvent('payment.session.created', BIZ)))).status).toBe(
      503,
    );
    release();
    const closing = receiver.close();
    expect((await post(url2, JSON.stringify(createTestEvent('payment.session.created', BIZ)))).status).toBe(
      503,
    );
    await closing;
    expect(of<ReceivedOutcome>('received').map((o) => o.reason ?? o.outcome)).toEqual([
      'accepted',
      'queue_full',
      'shutting_down',
    ]);
  });

  it('counts a request that makes handle() reject as internal_error, and its reasons are codes of ERROR_STATUS', async () => {
    const { metrics, of } = recorder();
    const receiver = createReceiver({ businessIds: [BIZ], allowAnyIp: true, recoveryIntervalMs: 0, metrics });
    await expect(
      receiver.handle({ method: 'POST', contentType: undefined, ip: '1' } as never),
    ).rejects.toThrow(TypeError);
    expect(of('received')).toEqual([{ outcome: 'refused', reason: 'internal_error', status: 500 }]);
    for (const reason of REFUSAL_REASONS) expect(ERROR_STATUS[reason]).toBeGreaterThanOrEqual(400);
  });

  it('reports each handler run, the retries and the dead letter, per event type', async () => {
    const { calls, metrics, of } = recorder();
    const { receiver, url } = await served({ metrics, retry: { attempts: 3, minDelayMs: 1, maxDelayMs: 2 } });
    let failures = 2;
    receiver.on('payment.session.created', () => {
      if (failures-- > 0) throw new Error('flaky');
    });
    receiver.on('payment.session.failed', async () => {
      throw new Error('always');
    });
    await post(url, JSON.stringify(createTestEvent('payment.session.created', BIZ)));
    await receiver.idle();
    await post(url, JSON.stringify(createTestEvent('payment.session.failed', BIZ)));
    await receiver.idle();
    const runs = of<HandledRun>('handled');
    for (const run of runs) expect(run.durationMs).toBeGreaterThanOrEqual(0);
    expect(runs.map(({ event, attempt, ok, code }) => ({ event, attempt, ok, code }))).toEqual([
      { event: 'payment.session.created', attempt: 1, ok: false, code: 'handler_failed' },
      { event: 'payment.session.created', attempt: 2, ok: false, code: 'handler_failed' },
      { event: 'payment.session.created', attempt: 3, ok: true, code: undefined },
      { event: 'payment.session.failed', attempt: 1, ok: false, code: 'handler_failed' },
      { event: 'payment.session.failed', attempt: 2, ok: false, code: 'handler_failed' },
      { event: 'payment.session.failed', attempt: 3, ok: false, code: 'handler_failed' },
    ]);
    expect(
      of<{ event: string; nextAttempt: number }>('retry').map((r) => `${r.event}#${r.nextAttempt}`),
    ).toEqual([
      'payment.session.created#2',
      'payment.session.created#3',
      'payment.session.failed#2',
      'payment.session.failed#3',
    ]);
    expect(of('deadLetter')).toEqual([{ event: 'payment.session.failed', attempts: 3 }]);
    // In order: a run, then the retry it leads to; the dead letter after the last run.
    expect(calls.map(([kind]) => kind).slice(-3)).toEqual(['retry', 'handled', 'deadLetter']);
  });

  it('tells a handler timeout from a failure', async () => {
    const { metrics, of } = recorder();
    const { receiver, url } = await served({ metrics, handlerTimeoutMs: 20, retry: { attempts: 1 } });
    receiver.onAny(
      (_event, { signal }) => new Promise((resolve) => signal.addEventListener('abort', resolve)),
    );
    await post(url, JSON.stringify(createTestEvent('payment.session.created', BIZ)));
    await receiver.idle();
    expect(of<HandledRun>('handled').map((r) => r.code)).toEqual(['handler_timeout']);
    expect(of('deadLetter')).toEqual([{ event: 'payment.session.created', attempts: 1 }]);
  });

  it('reports the runs of an unknown event under its name, synchronous handlers included', async () => {
    const { metrics, of } = recorder();
    const { receiver, url } = await served({ metrics });
    receiver.onUnknown('payment.refund.created', () => {});
    await post(url, JSON.stringify(signEvent('payment.refund.created', { id: 'r1' }, BIZ)));
    await receiver.idle();
    expect(of<HandledRun>('handled').map((r) => [r.event, r.ok])).toEqual([['payment.refund.created', true]]);
  });

  it('never lets a callback that throws or rejects break a request or a handler, and logs each callback once', async () => {
    const logged: string[] = [];
    const logger: Logger = { ...silentLogger, error: (_o, msg) => void logged.push(msg ?? '') };
    const handled: string[] = [];
    const { receiver, url } = await served({
      logger,
      retry: { attempts: 2, minDelayMs: 1, maxDelayMs: 1 },
      metrics: {
        onReceived() {
          throw new Error('collector down');
        },
        onHandled: () => Promise.reject(new Error('async collector down')),
        onRetry() {
          throw new Error('retry');
        },
        onDeadLetter() {
          throw new Error('dead letter');
        },
      },
    });
    receiver.on('payment.session.created', (event) => void handled.push(event.data.id));
    receiver.on('payment.session.failed', () => {
      throw new Error('handler');
    });
    const events = [
      createTestEvent('payment.session.created', BIZ),
      createTestEvent('payment.session.created', BIZ),
    ];
    for (const event of events) expect((await post(url, JSON.stringify(event))).status).toBe(200);
    expect((await post(url, JSON.stringify(events[0]))).status).toBe(200);
    expect((await post(url, JSON.stringify(createTestEvent('payment.session.failed', BIZ)))).status).toBe(
      200,
    );
    await receiver.idle();
    await new Promise((resolve) => setImmediate(resolve));
    expect(handled).toEqual(events.map((e) => e.data.id));
    expect(logged.filter((m) => m.includes('onReceived'))).toHaveLength(1);
    expect(logged.filter((m) => m.includes('onHandled'))).toHaveLength(1);
    expect(logged.filter((m) => m.includes('onRetry'))).toHaveLength(1);
    expect(logged.filter((m) => m.includes('onDeadLetter'))).toHaveLength(1);
  });

  it('calls a callback with the metrics object as `this`, so a class can implement the hook', async () => {
    class Counts implements ReceiverMetrics {
      accepted = 0;
      onReceived(outcome: ReceivedOutcome) {
        if (outcome.outcome === 'accepted') this.accepted++;
      }
    }
    const counts = new Counts();
    const { url } = await served({ metrics: counts });
    await post(url, JSON.stringify(createTestEvent('payment.session.created', BIZ)));
    expect(counts.accepted).toBe(1);
  });

  it.each([
    [null, /Invalid metrics/],
    ['count', /Invalid metrics/],
    [{ onRecieved: () => {} }, /unknown callback "onRecieved" \(did you mean "onReceived"\?\)/],
    [{ onHandled: 1 }, /metrics.onHandled: expected a function/],
  ])('refuses metrics: %j with a TypeError', (metrics, message) => {
    expect(() =>
      createReceiver({
        businessIds: [BIZ],
        allowAnyIp: true,
        recoveryIntervalMs: 0,
        metrics: metrics as never,
      }),
    ).toThrow(message);
  });
});

describe('receiver.stats()', () => {
  it('counts the work held, by state, against its bounds', async () => {
    const { receiver, url } = await served({ concurrency: 1 });
    expect(receiver.stats()).toEqual({
      held: 0,
      heldBytes: 0,
      claiming: 0,
      accepted: 0,
      queued: 0,
      running: 0,
      waitingForOrder: 0,
      stale: 0,
      maxQueuedEvents: 1000,
      maxQueuedBytes: 16 * 1024 * 1024,
      concurrency: 1,
    });
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    let started = 0;
    receiver.onAny(() => {
      started++;
      return held;
    });
    const bodies = [1, 2, 3].map(() => JSON.stringify(createTestEvent('payment.session.created', BIZ)));
    for (const body of bodies) await post(url, body);
    for (let i = 0; i < 100 && started === 0; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    const stats = receiver.stats();
    expect(stats).toMatchObject({ held: 3, claiming: 0, accepted: 0, queued: 2, running: 1 });
    expect(stats.heldBytes).toBe(bodies.reduce((n, b) => n + b.length, 0));
    release();
    await receiver.idle();
    expect(receiver.stats()).toMatchObject({ held: 0, heldBytes: 0, queued: 0, running: 0 });
  });
});
