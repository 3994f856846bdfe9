import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  createMemoryStore,
  createReceiver,
  type Receiver,
  type ReceiverOptions,
  silentLogger,
} from '../src/index.js';
import { loadOptional } from '../src/receiver/tracing.js';
import { createTestEvent } from '../src/testing/index.js';
import { serveReceiver } from './fixtures/serve-receiver.js';

// A real SDK, registered globally as an application registers it: the receiver reaches it
// through @opentelemetry/api, which it loads itself.
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const contextManager = new AsyncLocalStorageContextManager();
beforeAll(() => {
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(contextManager.enable());
});
beforeEach(() => {
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
});
afterAll(async () => {
  await provider.shutdown();
  trace.disable();
  context.disable();
  propagation.disable();
});

const BIZ = 'b2c1d0e9-1f2a-4b3c-8d4e-5f6a7b8c9d0e';
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT_ID = '00f067aa0ba902b7';
const TRACEPARENT = `00-${TRACE_ID}-${PARENT_ID}-01`;

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
  exporter.reset();
});

async function served(options: Partial<ReceiverOptions> = {}): Promise<{ receiver: Receiver; url: string }> {
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

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });

const handleSpans = (spans = exporter.getFinishedSpans()) =>
  spans.filter((s) => s.name.startsWith('payhook.handle '));

describe('tracing of handler runs', () => {
  it("makes a span per run, a child of the request's traceparent, in whose context the handler runs", async () => {
    const { receiver, url } = await served();
    let activeInHandler: string | undefined;
    receiver.on('payment.session.succeeded', async () => {
      activeInHandler = trace.getActiveSpan()?.spanContext().spanId;
      await trace.getTracer('merchant').startActiveSpan('mark order paid', async (span) => span.end());
    });
    const event = createTestEvent('payment.session.succeeded', BIZ);
    const res = await post(url, event, {
      traceparent: TRACEPARENT,
      tracestate: 'vendor=abc',
      'payhook-attempt': '3',
      'payhook-event-id': 'evt_123',
      'payhook-delivery-id': 'dlv_456',
    });
    expect(res.status).toBe(200);
    await receiver.idle();
    const [span] = handleSpans();
    expect(handleSpans()).toHaveLength(1);
    expect(span?.name).toBe('payhook.handle payment.session.succeeded');
    expect(span?.kind).toBe(SpanKind.CONSUMER);
    expect(span?.spanContext().traceId).toBe(TRACE_ID);
    expect(span?.parentSpanContext?.spanId).toBe(PARENT_ID);
    expect(span?.parentSpanContext?.isRemote).toBe(true);
    expect(span?.spanContext().traceState?.get('vendor')).toBe('abc');
    expect(span?.attributes).toEqual({
      'payhook.event.type': 'payment.session.succeeded',
      'payhook.event.key': `${BIZ}:${event.checksum}`,
      'payhook.event.id': 'evt_123',
      'payhook.delivery.id': 'dlv_456',
      'payhook.attempt': 3,
      'payhook.handler.attempt': 1,
      'payhook.outcome': 'processed',
    });
    expect(span?.status.code).toBe(SpanStatusCode.UNSET);
    // The handler's own span is a child of the run's.
    expect(activeInHandler).toBe(span?.spanContext().spanId);
    const inner = exporter.getFinishedSpans().find((s) => s.name === 'mark order paid');
    expect(inner?.parentSpanContext?.spanId).toBe(span?.spanContext().spanId);
    expect(inner?.spanContext().traceId).toBe(TRACE_ID);
  });

  it('records the error of each failed run, and says which runs retry and which dead-letters', async () => {
    const { receiver, url } = await served({ retry: { attempts: 2, minDelayMs: 1, maxDelayMs: 1 } });
    receiver.on('payment.session.failed', () => {
      throw new Error('ledger unavailable');
    });
    await post(url, createTestEvent('payment.session.failed', BIZ), { traceparent: TRACEPARENT });
    await receiver.idle();
    const spans = handleSpans();
    expect(
      spans.map((s) => [s.attributes['payhook.handler.attempt'], s.attributes['payhook.outcome']]),
    ).toEqual([
      [1, 'retrying'],
      [2, 'dead_lettered'],
    ]);
    for (const span of spans) {
      expect(span.spanContext().traceId).toBe(TRACE_ID);
      expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: 'ledger unavailable' });
      const exception = span.events.find((e) => e.name === 'exception');
      expect(exception?.attributes?.['exception.message']).toBe('ledger unavailable');
    }
  });

  it('reads traceparent itself when no propagator is registered', async () => {
    propagation.disable();
    const { receiver, url } = await served();
    receiver.onAny(() => {});
    await post(url, createTestEvent('payment.session.created', BIZ), {
      traceparent: TRACEPARENT,
      tracestate: 'vendor=abc',
    });
    await receiver.idle();
    const [span] = handleSpans();
    expect(span?.spanContext().traceId).toBe(TRACE_ID);
    expect(span?.parentSpanContext?.spanId).toBe(PARENT_ID);
    expect(span?.spanContext().traceState?.get('vendor')).toBe('abc');
  });

  it.each([
    ['no traceparent', {}],
    ['an invalid traceparent', { traceparent: `00-${'0'.repeat(32)}-${PARENT_ID}-01` }],
    ['version 00 with more after the flags', { traceparent: `${TRACEPARENT}-extra` }],
  ])(
    'starts a new trace with %s, never under the context that happened to be active',
    async (_name, headers) => {
      for (const registered of [true, false]) {
        if (!registered) propagation.disable();
        const { receiver } = await served();
        receiver.onAny(() => {});
        // The request, and so the worker it starts, runs inside another span: not the run's parent.
        await trace.getTracer('test').startActiveSpan('unrelated', async (unrelated) => {
          const result = await receiver.handle({
            method: 'POST',
            contentType: 'application/json',
            remoteAddress: '127.0.0.1',
            headers,
            rawBody: JSON.stringify(createTestEvent('payment.session.created', BIZ)),
          });
          result.afterResponse?.();
          unrelated.end();
        });
        await receiver.idle();
        const [span] = handleSpans();
        expect(span?.parentSpanContext).toBeUndefined();
        expect(span?.spanContext().traceId).not.toBe(TRACE_ID);
        exporter.reset();
      }
    },
  );

  it('starts a new trace for an event recovered from the store, which keeps no headers', async () => {
    const store = createMemoryStore();
    const event = createTestEvent('payment.session.created', BIZ);
    const key = `${BIZ}:${event.checksum}`;
    // An owner that died right after the 200: its lease lapses with the event unfinished.
    await store.claim(key, { owner: 'dead', leaseMs: 1, payload: JSON.stringify(event), businessId: BIZ });
    await new Promise((resolve) => setTimeout(resolve, 10));
    const { receiver } = await served({ store });
    receiver.onAny(() => {});
    expect(await receiver.recover()).toBe(1);
    await receiver.idle();
    const [span] = handleSpans();
    expect(span?.attributes['payhook.event.key']).toBe(key);
    expect(span?.parentSpanContext).toBeUndefined();
  });

  it('makes no span with tracing: false, and uses the tracer given with { tracer }', async () => {
    const off = await served({ tracing: false });
    off.receiver.onAny(() => {});
    await post(off.url, createTestEvent('payment.session.created', BIZ), { traceparent: TRACEPARENT });
    await off.receiver.idle();
    expect(handleSpans()).toEqual([]);

    const own = new InMemorySpanExporter();
    const ownProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(own)] });
    const given = await served({ tracing: { tracer: ownProvider.getTracer('payhook') } });
    given.receiver.onAny(() => {});
    await post(given.url, createTestEvent('payment.session.created', BIZ), { traceparent: TRACEPARENT });
    await given.receiver.idle();
    expect(handleSpans()).toEqual([]);
    const spans: ReadableSpan[] = handleSpans(own.getFinishedSpans());
    expect(spans.map((s) => s.parentSpanContext?.spanId)).toEqual([PARENT_ID]);
    await ownProvider.shutdown();
  });

  it('runs the handlers without a span when the tracer given throws, and logs it once', async () => {
    const logged: string[] = [];
    const tracer = {
      startSpan(): object {
        throw new Error('exporter misconfigured');
      },
    };
    const { receiver, url } = await served({
      tracing: { tracer },
      logger: { ...silentLogger, error: (_o, msg) => void logged.push(msg ?? '') },
    });
    const handled: string[] = [];
    receiver.onAny((event) => void handled.push(event.event));
    for (const name of ['payment.session.created', 'payment.session.failed'] as const) {
      expect((await post(url, createTestEvent(name, BIZ), { traceparent: TRACEPARENT })).status).toBe(200);
    }
    await receiver.idle();
    expect(handled).toEqual(['payment.session.created', 'payment.session.failed']);
    expect(logged.filter((m) => m.includes('tracing threw'))).toHaveLength(1);
  });

  it('refuses a tracing option that is not a boolean or { tracer }', () => {
    for (const tracing of [{}, { tracer: {} }, 'on', null]) {
      expect(() =>
        createReceiver({
          businessIds: [BIZ],
          allowAnyIp: true,
          recoveryIntervalMs: 0,
          tracing: tracing as never,
        }),
      ).toThrow(/Invalid tracing/);
    }
  });

  it('loads an optional package that is absent as an error, not a throw', () => {
    const loaded = loadOptional('@payhook/not-installed');
    expect(loaded.module).toBeUndefined();
    expect((loaded.error as { code?: string }).code).toBe('MODULE_NOT_FOUND');
  });
});
