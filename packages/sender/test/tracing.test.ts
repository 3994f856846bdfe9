// @module-tag pglite
import { propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import type { FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { apiClient } from '../../../test/support/api-client.js';
import {
  type LoopbackReceiver,
  type Respond,
  startLoopbackReceiver,
} from '../../../test/support/loopback-receiver.js';
import { redactUrl } from '../src/delivery/tracing.js';
import {
  buildApp,
  createDeliveryClient,
  createDeliveryWorker,
  type Database,
  type DeliveryWorkerOptions,
  loadConfig,
} from '../src/index.js';
import { manualClock } from './fixtures/clock.js';
import { sessionRequest } from './fixtures/requests.js';
import { openTestDatabase } from './fixtures/storage.js';

// A real OpenTelemetry SDK registered as the global one, as an application would, with its spans
// kept in memory.
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

const BIZ = 'biz-tracing';
const KEY = 'sk_test_tracing';
/** A client's own trace, continued by the API's span. */
const CLIENT_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_SPAN = '00f067aa0ba902b7';

describe('OpenTelemetry spans', { timeout: 60_000 }, () => {
  let app: FastifyInstance;
  let base: string;
  let database: Database;
  let cleanup: () => Promise<void>;
  const receivers: LoopbackReceiver[] = [];
  const workers: { stop(): Promise<void> }[] = [];

  beforeAll(async () => {
    trace.setGlobalTracerProvider(provider);
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    ({ database, cleanup } = await openTestDatabase('pglite', 'tracing'));
    app = await buildApp({
      database,
      config: loadConfig({ PAYHOOK_API_KEYS: `${KEY}:${BIZ}:test`, PAYHOOK_ALLOW_PRIVATE_WEBHOOKS: '1' }),
      logger: false,
    });
    base = await app.listen({ port: 0, host: '127.0.0.1' });
  }, 60_000);
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
    await Promise.all(receivers.splice(0).map((r) => r.close()));
    await database.db
      .updateTable('deliveries')
      .set({ status: 'failed' })
      .where('status', '=', 'pending')
      .execute();
    exporter.reset();
  });
  afterAll(async () => {
    await app?.close();
    await cleanup?.();
    trace.disable();
    propagation.disable();
  });

  const api = apiClient(() => base, KEY);

  async function receiver(respond: Respond) {
    const r = await startLoopbackReceiver({ respond });
    receivers.push(r);
    return r;
  }

  function worker(options: Partial<DeliveryWorkerOptions> = {}) {
    const w = createDeliveryWorker({
      database,
      client: createDeliveryClient({ allowPrivate: true, totalTimeoutMs: 2000 }),
      ...options,
    });
    workers.push(w);
    return w;
  }

  async function registerAndCreate(url: string) {
    expect((await api('PATCH', '/accounts/settings', { webhook_urls: [url] })).status).toBe(200);
    expect((await api('POST', '/payment-sessions', sessionRequest)).status).toBe(201);
    exporter.reset();
  }

  const spans = (kind: SpanKind) => exporter.getFinishedSpans().filter((s) => s.kind === kind);
  /** The SERVER spans once `count` have ended: a span ends in `onResponse`, after the client has its answer. */
  const serverSpans = (count: number) =>
    vi.waitFor(
      () => {
        const found = spans(SpanKind.SERVER);
        expect(found).toHaveLength(count);
        return found;
      },
      { timeout: 5000, interval: 10 },
    );

  it('gives API requests SERVER spans named by route, continuing a client trace; /metrics and /healthz have none', async () => {
    const created = await fetch(`${base}/payment-sessions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${KEY}`,
        'content-type': 'application/json',
        traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`,
      },
      body: JSON.stringify(sessionRequest),
    });
    expect(created.status).toBe(201);
    expect((await fetch(`${base}/metrics`)).status).toBe(200);
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect((await fetch(`${base}/events/00000000-0000-4000-8000-000000000000?x=1`)).status).toBe(401);
    expect((await api('GET', '/no-such-route')).status).toBe(404);

    const found = await serverSpans(3);
    const byName = (name: string) => found.find((s) => s.name === name) as ReadableSpan;
    const post = byName('POST /payment-sessions');
    expect(post.attributes).toMatchObject({
      'http.request.method': 'POST',
      'http.route': '/payment-sessions',
      'url.path': '/payment-sessions',
      'url.scheme': 'http',
      'http.response.status_code': 201,
    });
    expect(post.spanContext().traceId).toBe(CLIENT_TRACE);
    expect(post.parentSpanContext?.spanId).toBe(CLIENT_SPAN);
    expect(post.status.code).toBe(SpanStatusCode.UNSET);
    expect(post.instrumentationScope.name).toBe('@payhook/sender');
    // Refused by the key check: a span all the same, with its route's pattern and not the path.
    const refused = byName('GET /events/:id');
    expect(refused.attributes).toMatchObject({
      'http.route': '/events/:id',
      'url.path': '/events/00000000-0000-4000-8000-000000000000',
      'http.response.status_code': 401,
    });
    // No route: the method alone names it.
    expect(byName('GET').attributes).toMatchObject({ 'http.response.status_code': 404 });
    expect(byName('GET').attributes['http.route']).toBeUndefined();
    expect(found.map((s) => s.attributes['url.path'])).not.toContain('/metrics');
  });

  it('makes a claim span and a CLIENT span per attempt, and sends its traceparent when asked', async () => {
    const clock = manualClock();
    const target = await receiver((_, n) => (n === 1 ? 503 : 200));
    const url = `${target.url}?token=s3cret`;
    await registerAndCreate(url);
    const w = worker({ now: clock.now, random: () => 0.5, traceparent: true });
    expect(await w.runDue()).toBe(1);

    const [claim] = spans(SpanKind.INTERNAL).filter((s) => s.attributes['payhook.claim.rows'] === 1);
    expect(claim).toMatchObject({ name: 'payhook.delivery.claim' });
    const [failed] = spans(SpanKind.CLIENT);
    expect(failed?.name).toBe('POST');
    expect(failed?.attributes).toMatchObject({
      'http.request.method': 'POST',
      'url.full': `${target.url}?token=REDACTED`,
      'server.address': '127.0.0.1',
      'server.port': target.port,
      'http.response.status_code': 503,
      'payhook.attempt': 1,
      'payhook.outcome': 'http_5xx',
      'error.type': 'unexpected_status',
    });
    expect(failed?.attributes['http.request.resend_count']).toBeUndefined();
    expect(failed?.status.code).toBe(SpanStatusCode.ERROR);
    expect(failed?.links.map((l) => l.context.spanId)).toEqual([claim?.spanContext().spanId]);
    // The receiver continues the attempt's own trace.
    const context = failed?.spanContext();
    expect(target.received[0]?.headers.traceparent).toBe(`00-${context?.traceId}-${context?.spanId}-01`);

    exporter.reset();
    clock.advance(5000);
    expect(await w.runDue()).toBe(1);
    const [retried] = spans(SpanKind.CLIENT);
    expect(retried?.attributes).toMatchObject({
      'http.response.status_code': 200,
      'payhook.attempt': 2,
      'http.request.resend_count': 1,
      'payhook.outcome': 'delivered',
    });
    expect(retried?.status.code).toBe(SpanStatusCode.UNSET);
    const header = target.received[1]?.headers.traceparent as string;
    expect(header.split('-')[1]).toBe(retried?.spanContext().traceId);
    expect(header.split('-')[1]).not.toBe(context?.traceId);
  });

  it('sends no traceparent unless asked, and the spans are made all the same', async () => {
    const target = await receiver(200);
    await registerAndCreate(target.url);
    expect(await worker().runDue()).toBe(1);
    expect(target.received[0]?.headers.traceparent).toBeUndefined();
    expect(spans(SpanKind.CLIENT)).toHaveLength(1);
  });

  it('ends a failed attempt span with its error, without a status code when nothing answered', async () => {
    const gone = await receiver(200);
    await gone.close();
    receivers.splice(receivers.indexOf(gone), 1);
    await registerAndCreate(gone.url);
    expect(await worker({ traceparent: true }).runDue()).toBe(1);
    const [span] = spans(SpanKind.CLIENT);
    expect(span?.attributes).toMatchObject({
      'error.type': 'connection_refused',
      'payhook.outcome': 'connection_refused',
    });
    expect(span?.attributes['http.response.status_code']).toBeUndefined();
    expect(span?.status).toMatchObject({ code: SpanStatusCode.ERROR });
  });
});

describe('redactUrl', () => {
  it.each([
    ['https://m.example/hooks?token=abc&v=2#x', 'https://m.example/hooks?token=REDACTED&v=REDACTED'],
    ['https://user:pw@m.example/hooks', 'https://REDACTED:REDACTED@m.example/hooks'],
    ['http://127.0.0.1:8080/webhooks/', 'http://127.0.0.1:8080/webhooks/'],
    ['not a url', 'REDACTED'],
  ])('shows %s as %s', (url, shown) => {
    expect(redactUrl(url)).toBe(shown);
  });
});

describe('PAYHOOK_TRACEPARENT', () => {
  it('is off unless set to 1, and refuses anything but 1 or 0', () => {
    expect(loadConfig({}).traceparent).toBe(false);
    expect(loadConfig({ PAYHOOK_TRACEPARENT: '0' }).traceparent).toBe(false);
    expect(loadConfig({ PAYHOOK_TRACEPARENT: '1' }).traceparent).toBe(true);
    expect(() => loadConfig({ PAYHOOK_TRACEPARENT: 'yes' })).toThrow(/PAYHOOK_TRACEPARENT/);
  });
});
