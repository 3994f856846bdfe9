// @module-tag postgres
// @module-tag pglite
import { randomUUID } from 'node:crypto';
import { readSignatureHeaders, verifyChecksum, verifyWebhookSignature } from '@payhook/core';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient } from '../../../test/support/api-client.js';
import { readServerSentEvents, type ServerSentEvent } from '../../cli/src/listen/sse.js';
import {
  buildApp,
  type Database,
  LISTEN_RESUME_WINDOW_SECONDS,
  loadConfig,
  MAX_LISTENERS_PER_BUSINESS,
  signedPayload,
} from '../src/index.js';
import { sessionRequest as session } from './fixtures/requests.js';
import { openTestDatabase, testStorages } from './fixtures/storage.js';

interface Webhook {
  delivery_id: string;
  event_id: string;
  type: string;
  destination: string;
  headers: Record<string, string>;
  body: string;
}

describe.each(testStorages())('GET /listen on %s', { timeout: 60_000 }, (storage) => {
  let app: FastifyInstance;
  let base: string;
  let database: Database;
  let cleanup: () => Promise<void>;
  const BIZ = `biz-listen-${storage}`;
  const KEY = `sk_test_listen_${storage}`;
  const OTHER = `sk_test_listen_other_${storage}`;
  const LIVE = `sk_live_listen_${storage}`;
  const streams: AbortController[] = [];

  beforeAll(async () => {
    ({ database, cleanup } = await openTestDatabase(storage, 'listen'));
    app = await buildApp({
      database,
      config: loadConfig({
        PAYHOOK_API_KEYS: `${KEY}:${BIZ}:test,${OTHER}:biz-other-${storage}:test,${LIVE}:${BIZ}:live`,
      }),
      logger: false,
    });
    base = await app.listen({ port: 0, host: '127.0.0.1' });
  }, 60_000);
  afterAll(async () => {
    for (const stream of streams) stream.abort();
    await app?.close();
    await cleanup?.();
  });

  const api = apiClient(() => base, KEY);
  const call = (method: string, path: string, body?: unknown, key = KEY) =>
    // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field below
    apiClient(() => base, key)<any>(method, path, body);
  const createSession = async () => {
    const res = await api<{ data: { payment: { id: string } } }>('POST', '/payment-sessions', session);
    expect(res.status).toBe(201);
    return res.body.data.payment.id;
  };
  const eventOf = async (paymentId: string) =>
    (await call('GET', `/events?payment_id=${paymentId}`)).body.data[0].id as string;

  /** Opens a stream; its messages gather in `messages` until `close()`. */
  async function listen(query = '', headers: Record<string, string> = {}, key = KEY) {
    const controller = new AbortController();
    streams.push(controller);
    const response = await fetch(`${base}/listen${query}`, {
      headers: { authorization: `Bearer ${key}`, ...headers },
      signal: controller.signal,
    });
    const messages: ServerSentEvent[] = [];
    if (response.status === 200) {
      void (async () => {
        try {
          for await (const m of readServerSentEvents(response.body as unknown as AsyncIterable<Uint8Array>)) {
            messages.push(m);
          }
        } catch {}
      })();
    }
    const webhooks = () =>
      messages.filter((m) => m.event === 'webhook').map((m) => JSON.parse(m.data) as Webhook);
    await expect.poll(() => messages.length > 0 || response.status !== 200).toBe(true);
    return {
      response,
      messages,
      webhooks,
      ready: () => JSON.parse(messages[0]?.data ?? '{}'),
      close: () => controller.abort(),
    };
  }

  it('streams each new event once to every listener, as a delivery sends it, and none made before', async () => {
    const before = await createSession();
    const a = await listen();
    const b = await listen('?events=payment.session.succeeded');
    const c = await listen();
    expect(a.response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(a.ready()).toMatchObject({
      business_id: BIZ,
      mode: 'test',
      resume_window_seconds: LISTEN_RESUME_WINDOW_SECONDS,
    });
    expect(a.ready().listener_id).toMatch(/^lst_/);
    expect(b.ready()).toMatchObject({ events: ['payment.session.succeeded'] });

    const payments = [await createSession(), await createSession(), await createSession()];
    const events = await Promise.all(payments.map(eventOf));
    await expect.poll(() => a.webhooks().length).toBe(3);
    await expect.poll(() => c.webhooks().length).toBe(3);
    expect(a.webhooks().map((w) => w.event_id)).toEqual(events);
    expect(c.webhooks().map((w) => w.event_id)).toEqual(events);
    expect(a.webhooks().map((w) => w.event_id)).not.toContain(await eventOf(before));
    // The filter: only succeeded events, and none were made.
    expect(b.webhooks()).toEqual([]);
    // SSE ids are the event ids: what a client sends back as Last-Event-ID.
    expect(a.messages.filter((m) => m.event === 'webhook').map((m) => m.id)).toEqual(events);

    // Each carries the exact body and both proofs; each listener gets its own delivery id.
    const secret = (await call('GET', '/accounts/signing-secrets')).body.data[0].secret as string;
    for (const webhook of a.webhooks()) {
      expect(webhook.destination).toBe(`cli:${a.ready().listener_id}`);
      expect(webhook.headers['webhook-id']).toBe(webhook.event_id);
      expect(webhook.headers['payhook-delivery-id']).toBe(webhook.delivery_id);
      expect(
        verifyWebhookSignature(readSignatureHeaders(webhook.headers), webhook.body, { secrets: [secret] }),
      ).toMatchObject({ ok: true });
      expect(verifyChecksum({ rawBody: webhook.body }, { businessIds: [BIZ] })).toMatchObject({ ok: true });
      const stored = await database.db
        .selectFrom('events')
        .select('payload')
        .where('id', '=', webhook.event_id)
        .executeTakeFirstOrThrow();
      expect(webhook.body).toBe(stored.payload);
    }
    expect(new Set([...a.webhooks(), ...c.webhooks()].map((w) => w.delivery_id)).size).toBe(6);
    for (const s of [a, b, c]) s.close();
  });

  it('refuses a live key without live=true, live=true on a test key, an unknown event type and no key', async () => {
    const live = await listen('', {}, LIVE);
    expect(live.response.status).toBe(403);
    expect(await live.response.json()).toMatchObject({ error: { code: 'live_listen_not_requested' } });
    const liveOk = await listen('?live=true', {}, LIVE);
    expect(liveOk.response.status).toBe(200);
    expect(liveOk.ready()).toMatchObject({ mode: 'live' });
    liveOk.close();
    const testLive = await listen('?live=true');
    expect(testLive.response.status).toBe(400);
    const unknown = await listen('?events=payment.sesion.created');
    expect(unknown.response.status).toBe(400);
    expect(await unknown.response.json()).toMatchObject({
      error: { message: 'Unknown event type "payment.sesion.created".' },
    });
    const none = await fetch(`${base}/listen`);
    expect(none.status).toBe(401);
    const badAfter = await listen('?after=not-a-uuid');
    expect(badAfter.response.status).toBe(400);
  });

  it(`takes at most ${MAX_LISTENERS_PER_BUSINESS} streams of one business at once (429 past that), and frees a place when one closes`, async () => {
    const open = [];
    for (let i = 0; i < MAX_LISTENERS_PER_BUSINESS; i++) {
      const stream = await listen('', {}, OTHER);
      expect(stream.response.status).toBe(200);
      open.push(stream);
    }
    const refused = await listen('', {}, OTHER);
    expect(refused.response.status).toBe(429);
    expect(await refused.response.json()).toMatchObject({ error: { code: 'too_many_listeners' } });
    // Another business is not affected.
    const mine = await listen();
    expect(mine.response.status).toBe(200);
    mine.close();
    open.pop()?.close();
    await expect
      .poll(async () => {
        const again = await listen('', {}, OTHER);
        if (again.response.status === 200) open.push(again);
        return again.response.status;
      })
      .toBe(200);
    for (const stream of open) stream.close();
  });

  it('resumes after the last event received: what was missed, in order, nothing twice; says when it cannot', async () => {
    const first = await listen();
    const id = first.ready().listener_id as string;
    await createSession();
    const last = await eventOf(await createSession());
    await expect.poll(() => first.webhooks().length).toBe(2);
    first.close();
    const missed = [await createSession(), await createSession(), await createSession()];
    const missedEvents = await Promise.all(missed.map(eventOf));

    const again = await listen(`?listener_id=${id}`, { 'last-event-id': last });
    expect(again.ready()).toMatchObject({ listener_id: id, resumed: true });
    await expect.poll(() => again.webhooks().length).toBe(3);
    expect(again.webhooks().map((w) => w.event_id)).toEqual(missedEvents);
    // Live again after the catch-up.
    const next = await eventOf(await createSession());
    await expect.poll(() => again.webhooks().map((w) => w.event_id)).toEqual([...missedEvents, next]);
    again.close();

    // `after` does the same as the header.
    const byQuery = await listen(`?after=${missedEvents[1]}`);
    await expect.poll(() => byQuery.webhooks().map((w) => w.event_id)).toEqual([missedEvents[2], next]);
    byQuery.close();

    // Past the window: not resumed, and says why; an id the sender does not know, likewise.
    await sql`update events set created_at = created_at - interval '10 minutes' where id = ${last}`.execute(
      database.db,
    );
    const old = await listen(`?after=${last}`);
    expect(old.ready()).toMatchObject({ resumed: false, reason: 'outside_window' });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(old.webhooks()).toEqual([]);
    old.close();
    const unknown = await listen(`?after=${randomUUID()}`);
    expect(unknown.ready()).toMatchObject({ resumed: false, reason: 'unknown_event' });
    unknown.close();
    // A header that is no UUID at all is an unknown event too, never a failed query.
    for (const header of ['-'.repeat(36), 'x'.repeat(5000), "1' or '1'='1"]) {
      const odd = await listen('', { 'last-event-id': header });
      expect(odd.response.status).toBe(200);
      expect(odd.ready()).toMatchObject({ resumed: false, reason: 'unknown_event' });
      odd.close();
    }
    // Another business's event is unknown to this key.
    const other = await listen(`?after=${next}`, {}, OTHER);
    expect(other.ready()).toMatchObject({ resumed: false, reason: 'unknown_event' });
    other.close();
  });

  it("records a listener's attempts as deliveries to cli:<id>, once, for its own events only; never redelivered", async () => {
    const stream = await listen();
    const listenerId = stream.ready().listener_id as string;
    const payments = [await createSession(), await createSession()];
    await expect.poll(() => stream.webhooks().length).toBe(2);
    stream.close();
    const [ok, refused] = stream.webhooks() as [Webhook, Webhook];
    const attempt = (w: Webhook, status: number | null) => ({
      delivery_id: w.delivery_id,
      event_id: w.event_id,
      url: 'http://localhost:3000/webhooks',
      started_at: new Date().toISOString(),
      latency_ms: 12,
      status_code: status,
      response_body: status === null ? null : '{"received":true}',
      error: status === null ? { code: 'connection_refused', message: 'connection refused' } : null,
    });
    const report = { listener_id: listenerId, attempts: [attempt(ok, 200), attempt(refused, null)] };
    expect((await call('POST', '/listen/attempts', report)).body).toEqual({ data: { recorded: 2 } });
    // The same report again records nothing; another business cannot record on these events.
    expect((await call('POST', '/listen/attempts', report)).body).toEqual({ data: { recorded: 0 } });
    const foreign = { listener_id: 'lst_x', attempts: [{ ...attempt(ok, 200), delivery_id: randomUUID() }] };
    expect((await call('POST', '/listen/attempts', foreign, OTHER)).body).toEqual({ data: { recorded: 0 } });

    const shown = (await call('GET', `/events/${ok.event_id}`)).body.data;
    expect(shown.deliveries).toEqual([
      expect.objectContaining({
        id: ok.delivery_id,
        url: `cli:${listenerId}`,
        status: 'delivered',
        attempt_count: 1,
        next_attempt_at: null,
        attempts: [
          expect.objectContaining({
            attempt: 1,
            url: 'http://localhost:3000/webhooks',
            status_code: 200,
            latency_ms: 12,
          }),
        ],
      }),
    ]);
    const failed = (await call('GET', `/events/${refused.event_id}`)).body.data;
    expect(failed.deliveries[0]).toMatchObject({
      status: 'failed',
      attempts: [{ error: { code: 'connection_refused' } }],
    });
    // What a developer's machine did never makes an event failed, and is not redelivered.
    expect(failed.delivery_status).toBe('none');
    const none = (await call('GET', '/events?delivery_status=none&limit=100')).body.data;
    expect(none.map((e: { id: string }) => e.id)).toContain(refused.event_id);
    const since = new Date(Date.now() - 60_000).toISOString();
    expect((await call('POST', '/events/redeliver', { since })).body).toMatchObject({
      data: { redelivered: 0 },
    });
    expect(payments).toHaveLength(2);

    // Malformed reports are refused with the field named.
    const bad = await call('POST', '/listen/attempts', {
      listener_id: 'lst_x',
      attempts: [{ event_id: 'x' }],
    });
    expect(bad.status).toBe(422);
    const yearZero = await call('POST', '/listen/attempts', {
      listener_id: 'lst_x',
      attempts: [{ ...attempt(ok, 200), delivery_id: randomUUID(), started_at: '0000-01-01T00:00:00Z' }],
    });
    expect(yearZero.status).toBe(422);
    expect(yearZero.body.error.details).toEqual([
      { field: 'attempts[0].started_at', message: 'must be a time between the years 1 and 9999' },
    ]);
  });

  // Registered on PostgreSQL only: PGlite runs one transaction at a time, so commits keep their order.
  if (storage === 'postgres')
    it('still streams, once, an event that committed after a later one (PostgreSQL runs transactions side by side)', async () => {
      const stream = await listen();
      const payment = await createSession();
      const early = randomUUID();
      // A transaction stamps an event, then waits while another event is made and streamed.
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      let inserted!: () => void;
      const stamped = new Promise<void>((resolve) => (inserted = resolve));
      const late = database.db.transaction().execute(async (tx) => {
        await tx
          .insertInto('events')
          .values({
            id: early,
            business_id: BIZ,
            mode: 'test',
            type: 'payment.session.created',
            payment_id: payment,
            payload: signedPayload('payment.session.created', { id: payment }, BIZ),
          })
          .execute();
        inserted();
        await held;
      });
      await stamped;
      const later = await eventOf(await createSession());
      await expect.poll(() => stream.webhooks().map((w) => w.event_id)).toContain(later);
      release();
      await late;
      await expect.poll(() => stream.webhooks().map((w) => w.event_id), { timeout: 5000 }).toContain(early);
      await new Promise((resolve) => setTimeout(resolve, 1200));
      const ids = stream.webhooks().map((w) => w.event_id);
      expect(ids.filter((id) => id === early)).toHaveLength(1);
      expect(ids.filter((id) => id === later)).toHaveLength(1);
      stream.close();
    });
});
