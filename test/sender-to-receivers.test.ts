// @module-tag pglite
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createReceiver,
  type ErrorInfo,
  type KnownEvent,
  type Receiver,
  type UnrecognizedEvent,
} from '@payhook/core';
import {
  buildApp,
  createDeliveryWorker,
  type Database,
  type DeliveryWorker,
  loadConfig,
  openDatabase,
} from '@payhook/sender';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADAPTER_APPS, type AdapterApp } from './support/adapter-apps.js';
import { apiClient } from './support/api-client.js';
import { copyPgliteTemplate } from './support/pglite-template.js';

// The sender and a receiver made with each adapter, over real HTTP on loopback: a payment session
// goes create -> capture -> sandbox completion, the delivery worker (started as the sender
// process starts it, with its real wake-ups) posts every event to every registered URL, and each
// receiver verifies the checksum and runs its handler once per event.

const BIZ = '5e2d9c1a-7b3f-4c6e-8a0d-1f2e3d4c5b6a';
const KEY = 'sk_test_e2e_sender_to_receivers';
const HOST = '127.0.0.1';

/** What one handler call saw. */
interface Handled {
  event: KnownEvent['event'];
  id: string;
  amount: number;
  currency: string;
  status: string;
  cancellationReason: string | null;
  businessId: string;
  key: string;
}

interface ServedReceiver {
  name: string;
  /** The registered webhook URL, with a trailing slash. */
  url: string;
  receiver: Receiver;
  handled: Handled[];
  unrecognized: UnrecognizedEvent[];
  errors: { error: unknown; info: ErrorInfo }[];
  close(): Promise<void>;
}

async function serve(adapter: AdapterApp): Promise<ServedReceiver> {
  const handled: Handled[] = [];
  const unrecognized: UnrecognizedEvent[] = [];
  const errors: { error: unknown; info: ErrorInfo }[] = [];
  const receiver = createReceiver({ businessIds: [BIZ], allowedIps: ['127.0.0.1', '::1'] });
  const record = (event: KnownEvent, context: { businessId: string; key: string }) => {
    handled.push({
      event: event.event,
      id: event.data.id,
      amount: event.data.amount,
      currency: event.data.currency,
      status: event.data.status,
      cancellationReason: event.data.cancellation_reason,
      businessId: context.businessId,
      key: context.key,
    });
  };
  receiver
    .on('payment.session.created', record)
    .on('payment.session.succeeded', record)
    .on('payment.session.failed', record)
    .onUnrecognized((info) => {
      unrecognized.push(info);
    })
    .onError((error, info) => errors.push({ error, info }));
  const app = await adapter.start(receiver);
  return {
    name: adapter.name,
    url: `${app.url}/webhooks/`,
    receiver,
    handled,
    unrecognized,
    errors,
    close: async () => {
      await app.close();
      await receiver.close();
    },
  };
}

const session = {
  customer: {
    first_name: 'Chidi',
    last_name: 'Okafor',
    email: 'chidi@example.com',
    phone_number: '+2348031234567',
    billing_address: {
      line1: '12 Awolowo Rd',
      line2: '',
      city: 'Lagos',
      state: 'Lagos',
      zip_code: '101233',
      country: 'NG',
    },
  },
  description: 'End-to-end order',
  currency: 'NGN',
  amount: 150_000,
  payment_method: { type: 'bank_account' },
  metadata: { order: { identifier: 'ORD-E2E', items: [{ name: 'Lamp', type: 'physical' }] } },
};

interface SenderEvent {
  id: string;
  type: string;
  payment_id: string | null;
  delivery_status: 'pending' | 'delivered' | 'failed' | 'none';
  payload: { event: string; data: { id: string }; checksum: string };
}
interface SenderDelivery {
  url: string;
  status: 'pending' | 'delivered' | 'failed';
  attempt_count: number;
  attempts: { attempt: number; status_code: number | null; response_body: string | null }[];
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` a bounded number of times (no wall-clock assertion: only a cap on the rounds). */
async function until(check: () => boolean | Promise<boolean>, what: string, rounds = 1200): Promise<void> {
  for (let i = 0; i < rounds; i++) {
    if (await check()) return;
    await pause(25);
  }
  throw new Error(`gave up waiting for ${what}`);
}

describe('sender -> receivers end to end (PGlite, every adapter)', { timeout: 60_000 }, () => {
  let dir: string;
  let database: Database;
  let app: Awaited<ReturnType<typeof buildApp>>;
  let base: string;
  let worker: DeliveryWorker;
  const receivers: ServedReceiver[] = [];
  const payments = { succeeded: '', failed: '' };

  const call = apiClient(() => base, KEY);

  async function eventsOf(paymentId: string): Promise<SenderEvent[]> {
    const res = await call<{ data: SenderEvent[] }>('GET', `/events?payment_id=${paymentId}&limit=100`);
    expect(res.status).toBe(200);
    return res.body.data;
  }

  async function deliveriesOf(eventId: string): Promise<SenderDelivery[]> {
    const res = await call<{ data: { deliveries: SenderDelivery[] } }>('GET', `/events/${eventId}`);
    expect(res.status).toBe(200);
    return res.body.data.deliveries;
  }

  /** Creates a session, captures it and completes it in the sandbox; returns the payment id. */
  async function pay(outcome: 'succeeded' | 'failed'): Promise<string> {
    const created = await call<{ data: { payment: { id: string } } }>('POST', '/payment-sessions', session);
    expect(created.status).toBe(201);
    const id = created.body.data.payment.id;
    expect((await call('POST', `/payment-sessions/${id}`)).status).toBe(200);
    const done = await call<{ data: { payment: { status: string } } }>(
      'POST',
      `/sandbox/payment-sessions/${id}/complete`,
      { outcome },
    );
    expect(done.status).toBe(200);
    expect(done.body.data.payment.status).toBe(outcome === 'succeeded' ? 'settled' : 'failed');
    return id;
  }

  const allEvents = async () => [
    ...(await eventsOf(payments.succeeded)),
    ...(await eventsOf(payments.failed)),
  ];

  // Opening PGlite and migrating takes a few seconds on a busy machine.
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'payhook-e2e-'));
    await copyPgliteTemplate(join(dir, 'data'));
    database = await openDatabase({ dataDir: join(dir, 'data') });
    app = await buildApp({
      database,
      // The receivers listen on loopback: the development switch lets their URLs register.
      config: loadConfig({ PAYHOOK_API_KEYS: `${KEY}:${BIZ}:test`, PAYHOOK_ALLOW_PRIVATE_WEBHOOKS: '1' }),
      logger: false,
    });
    base = await app.listen({ port: 0, host: HOST });
    for (const adapter of ADAPTER_APPS) receivers.push(await serve(adapter));
    const settings = await call<{ data: { webhook_urls: string[] } }>('PATCH', '/accounts/settings', {
      webhook_urls: receivers.map((r) => r.url),
    });
    expect(settings.status).toBe(200);
    expect(settings.body.data.webhook_urls).toEqual(receivers.map((r) => r.url));
    worker = createDeliveryWorker({ database, allowPrivate: true });
    await worker.start();

    payments.succeeded = await pay('succeeded');
    payments.failed = await pay('failed');
    // Every receiver ran its handler for the four events, and the sender saw every 200.
    await until(() => receivers.every((r) => r.handled.length >= 4), 'every receiver to handle four events');
    await until(
      async () => (await allEvents()).every((e) => e.delivery_status === 'delivered'),
      'the sender to record every delivery',
    );
    await Promise.all(receivers.map((r) => r.receiver.idle()));
  }, 60_000);

  afterAll(async () => {
    await worker?.stop();
    await app?.close();
    for (const r of receivers.splice(0)) await r.close();
    await database?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('registers one receiver per adapter, each a distinct loopback URL with a trailing slash', () => {
    expect(receivers.map((r) => r.name)).toEqual([
      'express 5',
      'express 4',
      'koa 3',
      'koa 2',
      'fastify 5',
      'web (Hono)',
      'web (node:http)',
    ]);
    expect(new Set(receivers.map((r) => r.url)).size).toBe(receivers.length);
    for (const r of receivers) expect(r.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/webhooks\/$/);
  });

  it('each receiver handles created twice, succeeded once and failed once: every event exactly once', () => {
    for (const r of receivers) {
      const counts = (name: string, payment: string) =>
        r.handled.filter((h) => h.event === name && h.id === payment).length;
      expect({ adapter: r.name, handled: r.handled.length }).toEqual({ adapter: r.name, handled: 4 });
      expect(
        [
          counts('payment.session.created', payments.succeeded),
          counts('payment.session.succeeded', payments.succeeded),
          counts('payment.session.created', payments.failed),
          counts('payment.session.failed', payments.failed),
        ],
        r.name,
      ).toEqual([1, 1, 1, 1]);
      // One idempotency key per event: no event was handled twice under another guise.
      expect(new Set(r.handled.map((h) => h.key)).size, r.name).toBe(4);
      expect(r.unrecognized, r.name).toEqual([]);
      expect(r.errors, r.name).toEqual([]);
    }
  });

  it('hands each handler the verified, typed payment: id, amount, currency and status of the event', () => {
    for (const r of receivers) {
      const byEvent = (name: string, payment: string) =>
        r.handled.find((h) => h.event === name && h.id === payment);
      const common = { amount: 150_000, currency: 'NGN', businessId: BIZ };
      expect(byEvent('payment.session.created', payments.succeeded), r.name).toMatchObject({
        ...common,
        id: payments.succeeded,
        status: 'pending',
      });
      expect(byEvent('payment.session.succeeded', payments.succeeded), r.name).toMatchObject({
        ...common,
        id: payments.succeeded,
        status: 'settled',
        cancellationReason: null,
      });
      expect(byEvent('payment.session.created', payments.failed), r.name).toMatchObject({
        ...common,
        id: payments.failed,
        status: 'pending',
      });
      expect(byEvent('payment.session.failed', payments.failed), r.name).toMatchObject({
        ...common,
        id: payments.failed,
        status: 'failed',
        cancellationReason: 'payment_failed',
      });
    }
  });

  it('shows every event as delivered in GET /events, with one 200 attempt to each URL', async () => {
    const events = await allEvents();
    expect(events.map((e) => [e.type, e.payment_id]).sort()).toEqual(
      [
        ['payment.session.created', payments.succeeded],
        ['payment.session.succeeded', payments.succeeded],
        ['payment.session.created', payments.failed],
        ['payment.session.failed', payments.failed],
      ].sort(),
    );
    for (const event of events) {
      expect(event.delivery_status, event.type).toBe('delivered');
      expect(event.payload.data.id).toBe(event.payment_id);
      const deliveries = await deliveriesOf(event.id);
      expect(deliveries.map((d) => d.url).sort()).toEqual(receivers.map((r) => r.url).sort());
      for (const d of deliveries) {
        expect(d, `${event.type} to ${d.url}`).toMatchObject({ status: 'delivered', attempt_count: 1 });
        expect(d.attempts.map((a) => [a.attempt, a.status_code])).toEqual([[1, 200]]);
        expect(JSON.parse(d.attempts[0]?.response_body ?? 'null')).toEqual({ received: true });
      }
    }
  });

  // Runs last: it adds a delivery of one event to every URL.
  it('acknowledges a redelivered event as a duplicate and does not run any handler again', async () => {
    const [succeeded] = (await eventsOf(payments.succeeded)).filter(
      (e) => e.type === 'payment.session.succeeded',
    );
    expect(succeeded).toBeDefined();
    const eventId = succeeded?.id as string;
    const redeliver = await call<{ data: { deliveries: { url: string }[] } }>(
      'POST',
      `/events/${eventId}/redeliver`,
    );
    expect(redeliver.status).toBe(202);
    expect(redeliver.body.data.deliveries).toHaveLength(receivers.length);
    let deliveries: SenderDelivery[] = [];
    await until(async () => {
      deliveries = await deliveriesOf(eventId);
      return deliveries.length === 2 * receivers.length && deliveries.every((d) => d.status === 'delivered');
    }, 'the redelivery to every URL');
    await Promise.all(receivers.map((r) => r.receiver.idle()));
    for (const r of receivers) {
      const toThis = deliveries.filter((d) => d.url === r.url);
      expect(
        toThis.map((d) => JSON.parse(d.attempts[0]?.response_body ?? 'null')),
        r.name,
      ).toEqual([{ received: true }, { received: true, duplicate: true }]);
      expect(r.handled, r.name).toHaveLength(4);
      expect(r.errors, r.name).toEqual([]);
    }
  });
});
