import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type Database, loadConfig } from '../src/index.js';
import { openTestDatabase } from './fixtures/storage.js';

const body = {
  customer: {
    first_name: 'Ngozi',
    last_name: 'Nwosu',
    email: 'ngozi@example.com',
    phone_number: '+2348022222222',
    billing_address: {
      line1: '2 Bode Thomas',
      line2: '',
      city: 'Surulere',
      state: 'Lagos',
      zip_code: '101283',
      country: 'NG',
    },
  },
  description: 'Order #5',
  currency: 'NGN',
  amount: 300000,
  metadata: { order: { identifier: 'ORD-5', items: [{ name: 'Book', type: 'physical' }] } },
};

describe.each(['pglite', 'postgres'] as const)('Idempotency-Key on %s', { timeout: 60_000 }, (storage) => {
  let app: FastifyInstance;
  let url: string;
  let database: Database;
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    ({ database, cleanup } = await openTestDatabase(storage, 'idem'));
    app = await buildApp({
      database,
      config: loadConfig({ PAYHOOK_API_KEYS: 'sk_test_idem:biz-i:test,sk_test_other:biz-j:test' }),
      logger: false,
    });
    url = await app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    await app?.close();
    await cleanup?.();
  });

  const post = (key: string | undefined, payload: unknown, apiKey = 'sk_test_idem') =>
    fetch(`${url}/payment-sessions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${apiKey}`,
        'content-type': 'application/json',
        ...(key ? { 'idempotency-key': key } : {}),
      },
      body: JSON.stringify(payload),
    });
  const paymentId = async (res: Response) =>
    ((await res.json()) as { data: { payment: { id: string } } }).data.payment.id;
  const eventCount = async () =>
    Number(
      (
        await database.db
          .selectFrom('events')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );

  it('replays the first response to a retry, and creates nothing more', async () => {
    const first = await post('order-5-attempt', body);
    expect(first.status).toBe(201);
    const id = await paymentId(first);
    const events = await eventCount();
    const retry = await post('order-5-attempt', { ...body, extra_field: undefined });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await paymentId(retry)).toBe(id);
    expect(await eventCount()).toBe(events);
  });

  it('refuses the same key with a different body (422), and keeps keys per business', async () => {
    expect((await post('shared-key', body)).status).toBe(201);
    const other = await post('shared-key', { ...body, amount: 400000 });
    expect(other.status).toBe(422);
    expect(((await other.json()) as { error: { code: string } }).error.code).toBe('idempotency_key_reused');
    expect((await post('shared-key', { ...body, amount: 400000 }, 'sk_test_other')).status).toBe(201);
  });

  it('replays a stored client error too', async () => {
    const bad = { ...body, amount: 5 };
    expect((await post('bad-amount', bad)).status).toBe(422);
    const again = await post('bad-amount', bad);
    expect(again.status).toBe(422);
  });

  it('never creates two sessions for concurrent requests with one key', async () => {
    const answers = await Promise.all([post('race', body), post('race', body), post('race', body)]);
    const statuses = answers.map((r) => r.status);
    expect(statuses.every((s) => s === 201 || s === 409)).toBe(true);
    const ids = new Set(await Promise.all(answers.filter((r) => r.status === 201).map(paymentId)));
    expect(ids.size).toBe(1);
  });

  it('answers 400 to a key longer than 255 characters', async () => {
    const res = await fetch(`${url}/payment-sessions`, {
      method: 'POST',
      headers: {
        authorization: 'Bearer sk_test_idem',
        'content-type': 'application/json',
        'idempotency-key': 'x'.repeat(300),
      },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(400);
  });
});
