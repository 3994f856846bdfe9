// @module-tag postgres
// @module-tag pglite
import { parseEvent, verifyChecksum } from '@payhook/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type Database, expireSessions, loadConfig } from '../src/index.js';
import { startTestApp, type TestApp } from './fixtures/app.js';
import { CURRENCY, customer, metadata } from './fixtures/requests.js';
import { openTestDatabase, testStorages } from './fixtures/storage.js';

describe.each(testStorages())('capture and the sandbox on %s', { timeout: 60_000 }, (storage) => {
  let url: string;
  let database: Database;
  const BIZ = '6c5b4a3d-2e1f-4a0b-9c8d-7e6f5a4b3c2d';
  const KEY = 'sk_test_sessions';
  const LIVE = 'sk_live_sessions';

  let testApp: TestApp | undefined;
  // PGlite's start and migrations can take longer than the default 10 s on a busy machine.
  beforeAll(async () => {
    testApp = await startTestApp(storage, 'sessions', {
      PAYHOOK_API_KEYS: `${KEY}:${BIZ}:test,${LIVE}:${BIZ}:live`,
    });
    ({ url, database } = testApp);
  }, 60_000);
  afterAll(() => testApp?.close());

  type Envelope = {
    auth_type: string | null;
    links: Record<string, string>;
    message: string;
    status: string;
    payment: {
      id: string;
      status: string;
      payment_method: Record<string, unknown> | null;
      cancellation_reason: string | null;
    };
  };
  const call = async (path: string, body?: unknown, key = KEY) => {
    const res = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as { data: Envelope; error?: { code: string } } };
  };
  const create = async (type: string, key = KEY) => {
    const res = await call(
      '/payment-sessions',
      {
        customer,
        description: 'd',
        currency: CURRENCY[type],
        amount: 150000,
        metadata,
        payment_method: { type },
      },
      key,
    );
    expect(res.status).toBe(201);
    return res.body.data.payment.id;
  };
  const events = (paymentId: string) =>
    database.db
      .selectFrom('events')
      .select(['type', 'payload'])
      .where('payment_id', '=', paymentId)
      .orderBy('created_at')
      .execute();

  it('bank transfer: a generated account to pay into, still pending, the waiting-for-resolution text', async () => {
    const id = await create('bank_account');
    const { status, body } = await call(`/payment-sessions/${id}`);
    expect(status).toBe(200);
    expect(body.data).toMatchObject({ status: 'pending', auth_type: null, links: {} });
    expect(body.data.message).toMatch(/resolution/);
    expect(body.data.payment.payment_method).toMatchObject({
      type: 'bank_account',
      account_type: 'savings',
      account_number: expect.stringMatching(/^\d{10}$/),
    });
  });

  it('a capture sent with a JSON content type and no body is a capture without one (200)', async () => {
    const id = await create('bank_account');
    const res = await fetch(`${url}/payment-sessions/${id}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { data: Envelope }).data.status).toBe('pending');
    // Where a body is required, an empty one is refused by the route's schema, with a stable code.
    const empty = await fetch(`${url}/customers`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    });
    expect(empty.status).toBe(400);
    expect(((await empty.json()) as { error: { code: string } }).error.code).toBe('invalid_request');
  });

  it.each([
    ['etransfer', ['redirect_url']],
    ['wallet', ['checkout_url', 'deeplink', 'payment_url', 'qr_url']],
  ])('%s: links for the customer, no payment method', async (type, keys) => {
    const id = await create(type);
    const { body } = await call(`/payment-sessions/${id}`);
    expect(Object.keys(body.data.links).sort()).toEqual([...keys].sort());
    expect(body.data.payment.payment_method).toBeNull();
    expect(body.data.status).toBe('pending');
  });

  it('crypto address: a deposit address and its network', async () => {
    const id = await create('crypto_address');
    const { body } = await call(`/payment-sessions/${id}`);
    expect(body.data.payment.payment_method).toMatchObject({
      type: 'crypto_address',
      address: expect.stringMatching(/^0x[0-9a-f]{40}$/),
      network: 'ethereum',
    });
  });

  it('card: 3DS with a redirect link and the masked card; 422 without a card', async () => {
    const id = await create('card');
    expect((await call(`/payment-sessions/${id}`, {})).status).toBe(422);
    const { body } = await call(`/payment-sessions/${id}`, {
      card: { number: '4242424242424242', expiry_month: 9, expiry_year: 2030, cvv: '123' },
    });
    expect(body.data).toMatchObject({ auth_type: '3ds', status: 'pending' });
    expect(body.data.links.redirect_url).toBeTruthy();
    expect(body.data.payment.payment_method).toMatchObject({
      type: 'card',
      card_number: '424242******4242',
      expiry_month: 9,
      expiry_year: 2030,
    });
  });

  it('card 4000000000000002 is declined at capture: the payment fails, with its event', async () => {
    const id = await create('card');
    const { body } = await call(`/payment-sessions/${id}`, {
      card: { number: '4000000000000002', expiry_month: 1, expiry_year: 2031, cvv: '999' },
    });
    expect(body.data.status).toBe('failed');
    expect(body.data.payment.cancellation_reason).toBe('card_declined');
    expect((await events(id)).map((e) => e.type)).toEqual([
      'payment.session.created',
      'payment.session.failed',
    ]);
  });

  it('capturing twice, or an unknown session, is refused', async () => {
    const id = await create('bank_account');
    expect((await call(`/payment-sessions/${id}`)).status).toBe(200);
    const again = await call(`/payment-sessions/${id}`);
    expect(again.status).toBe(409);
    expect(again.body.error?.code).toBe('invalid_state');
    expect((await call(`/payment-sessions/${crypto.randomUUID()}`)).status).toBe(404);
    expect((await call('/payment-sessions/nope')).status).toBe(404);
  });

  it('capturing a failed session is refused (409), and writes nothing', async () => {
    const card = { number: '4000000000000002', expiry_month: 1, expiry_year: 2031, cvv: '999' };
    const declined = await create('card');
    expect((await call(`/payment-sessions/${declined}`, { card })).body.data.status).toBe('failed');
    const paidFailed = await create('etransfer');
    await call(`/payment-sessions/${paidFailed}`);
    await call(`/sandbox/payment-sessions/${paidFailed}/complete`, { outcome: 'failed' });
    for (const [id, body] of [
      [declined, { card: { ...card, number: '4242424242424242' } }],
      [paidFailed, undefined],
    ] as const) {
      const res = await call(`/payment-sessions/${id}`, body);
      expect(res.status).toBe(409);
      expect(res.body.error?.code).toBe('invalid_state');
      expect((await events(id)).map((e) => e.type)).toEqual([
        'payment.session.created',
        'payment.session.failed',
      ]);
    }
  });

  it('an expired session fails with reason "expired" when captured', async () => {
    const id = await create('bank_account');
    await database.db
      .updateTable('payments')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where('id', '=', id)
      .execute();
    const res = await call(`/payment-sessions/${id}`);
    expect(res.status).toBe(409);
    expect(res.body.error?.code).toBe('session_expired');
    const row = await database.db
      .selectFrom('payments')
      .select(['status', 'data'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    expect(row.status).toBe('failed');
    expect((row.data as { cancellation_reason: string }).cancellation_reason).toBe('expired');
    expect((await events(id)).map((e) => e.type)).toEqual([
      'payment.session.created',
      'payment.session.failed',
    ]);
  });

  it('sandbox completion settles a captured session and writes payment.session.succeeded, signed', async () => {
    const id = await create('bank_account');
    expect((await call(`/sandbox/payment-sessions/${id}/complete`, { outcome: 'succeeded' })).status).toBe(
      409,
    ); // not captured yet
    await call(`/payment-sessions/${id}`);
    const done = await call(`/sandbox/payment-sessions/${id}/complete`, { outcome: 'succeeded' });
    expect(done.status).toBe(200);
    expect(done.body.data.payment.status).toBe('settled');
    const written = await events(id);
    expect(written.map((e) => e.type)).toEqual(['payment.session.created', 'payment.session.succeeded']);
    const payload = written[1]?.payload as string;
    expect(verifyChecksum({ rawBody: payload }, { businessIds: [BIZ] }).ok).toBe(true);
    const parsed = parseEvent(JSON.parse(payload));
    expect(parsed.kind === 'known' && parsed.event.data.status).toBe('settled');
    expect((await call(`/sandbox/payment-sessions/${id}/complete`, { outcome: 'failed' })).status).toBe(409);
  });

  it('sandbox completion can fail a captured session', async () => {
    const id = await create('etransfer');
    await call(`/payment-sessions/${id}`);
    const res = await call(`/sandbox/payment-sessions/${id}/complete`, { outcome: 'failed' });
    expect(res.body.data.payment).toMatchObject({
      status: 'failed',
      cancellation_reason: 'payment_failed',
    });
  });

  it('the sandbox does not exist for live keys, and refuses an unknown outcome', async () => {
    const id = await create('bank_account', LIVE);
    expect(
      (await call(`/sandbox/payment-sessions/${id}/complete`, { outcome: 'succeeded' }, LIVE)).status,
    ).toBe(404);
    const testId = await create('bank_account');
    expect((await call(`/sandbox/payment-sessions/${testId}/complete`, { outcome: 'maybe' })).status).toBe(
      422,
    );
  });
});

describe.each(testStorages())('the expiry sweeper on %s', { timeout: 60_000 }, (storage) => {
  it('fails every pending session past expires_at, once, with its event, and leaves the others', async () => {
    const { database, cleanup } = await openTestDatabase(storage, 'sweeper');
    try {
      const app = await buildApp({
        database,
        config: loadConfig({ PAYHOOK_API_KEYS: 'sk_test_sweep:biz-s:test' }),
        logger: false,
      });
      const create = async () => {
        const res = await app.inject({
          method: 'POST',
          url: '/payment-sessions',
          headers: { authorization: 'Bearer sk_test_sweep' },
          payload: { customer, description: 'd', currency: 'NGN', amount: 100000, metadata },
        });
        return (res.json() as { data: { payment: { id: string } } }).data.payment.id;
      };
      const [old1, old2, fresh] = [await create(), await create(), await create()];
      await database.db
        .updateTable('payments')
        .set({ expires_at: new Date(Date.now() - 60_000) })
        .where('id', 'in', [old1, old2])
        .execute();
      expect(await expireSessions(database)).toBe(2);
      expect(await expireSessions(database)).toBe(0);
      const rows = await database.db.selectFrom('payments').select(['id', 'status']).execute();
      expect(Object.fromEntries(rows.map((r) => [r.id, r.status]))).toEqual({
        [old1]: 'failed',
        [old2]: 'failed',
        [fresh]: 'pending',
      });
      const failedEvents = await database.db
        .selectFrom('events')
        .select('payment_id')
        .where('type', '=', 'payment.session.failed')
        .execute();
      expect(failedEvents.map((e) => e.payment_id).sort()).toEqual([old1, old2].sort());
      await app.close();
    } finally {
      await cleanup();
    }
  });
});
