// @module-tag postgres
// @module-tag pglite
import { parseEvent, verifyChecksum } from '@payhook/core';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type Database, loadConfig } from '../src/index.js';
import { WAKE_CHANNEL } from '../src/internal.js';
import { openTestDatabase, testStorages } from './fixtures/storage.js';

const customer = {
  first_name: 'Chinedu',
  last_name: 'Eze',
  email: 'chinedu@example.com',
  phone_number: '+2348031234567',
  billing_address: {
    line1: '3 Awolowo Rd',
    line2: '',
    city: 'Ikoyi',
    state: 'Lagos',
    zip_code: '106104',
    country: 'NG',
  },
};
const session = (extra: Record<string, unknown> = {}) => ({
  customer,
  description: 'Order #77',
  currency: 'NGN',
  amount: 250000,
  direction: 'incoming',
  payment_method: { type: 'bank_account' },
  metadata: { order: { identifier: 'ORD-77', items: [{ name: 'Tote', type: 'physical' }] } },
  isLive: false,
  ...extra,
});

describe.each(testStorages())('payment sessions on %s', { timeout: 60_000 }, (storage) => {
  let app: FastifyInstance;
  let url: string;
  let database: Database;
  let cleanup: () => Promise<void>;
  const KEY = 'sk_test_payments_a';
  const OTHER = 'sk_test_payments_b';
  const PAGES = 'sk_test_payments_pages';
  const BIZ = '3b2a1c0d-9e8f-4a7b-8c6d-5e4f3a2b1c0d';

  beforeAll(async () => {
    ({ database, cleanup } = await openTestDatabase(storage, 'payments'));
    app = await buildApp({
      database,
      config: loadConfig({
        PAYHOOK_API_KEYS: `${KEY}:${BIZ}:test,${OTHER}:biz-b:test,${PAGES}:biz-pages:test`,
      }),
      logger: false,
    });
    url = await app.listen({ port: 0, host: '127.0.0.1' });
    // Two webhook URLs for business A: every event gets one delivery row per URL.
    await fetch(`${url}/accounts/settings`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ webhook_urls: ['https://93.184.216.34/a/', 'https://93.184.216.34/b/'] }),
    });
  }, 60_000); // PGlite's start and migrations can take longer than the default 10 s on a busy machine
  afterAll(async () => {
    await app?.close();
    await cleanup?.();
  });

  type Answer = {
    data: Record<string, unknown> & { payment: Record<string, unknown> };
    error?: { code: string; details: { field: string }[] };
  };
  const post = (body: unknown, key = KEY) =>
    fetch(`${url}/payment-sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const get = (path: string, key = KEY) =>
    fetch(`${url}${path}`, { headers: { authorization: `Bearer ${key}` } });

  it('creates a session: 201 with the envelope, and writes one signed event and one delivery per URL', async () => {
    const res = await post(session({ reference: 'ref-created-1' }));
    expect(res.status).toBe(201);
    const { data } = (await res.json()) as Answer;
    expect(data).toMatchObject({ auth_type: null, links: {}, status: 'pending' });
    // Every timestamp in the API's one format: ISO 8601 UTC with microseconds, as the spec gives expires_at.
    expect(data.expires_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
    expect(data.payment.date).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
    expect(data.payment).toMatchObject({
      reference: 'ref-created-1',
      amount: 250000,
      currency: 'NGN',
      status: 'pending',
      mode: 'test',
      payment_method: null,
      cancellation_reason: null,
    });
    expect((data.payment.customer as { business_id: string }).business_id).toBe(BIZ);

    const events = await database.db
      .selectFrom('events')
      .selectAll()
      .where('payment_id', '=', data.payment.id as string)
      .execute();
    expect(events.map((e) => e.type)).toEqual(['payment.session.created']);
    const payload = events[0]?.payload as string;
    // The payload verifies with the receiving business's id, and parses as the typed event.
    const verified = verifyChecksum({ rawBody: payload }, { businessIds: [BIZ] });
    expect(verified.ok).toBe(true);
    expect(parseEvent(JSON.parse(payload)).kind).toBe('known');
    expect(JSON.parse(payload).data).toEqual(data.payment);
    const deliveries = await database.db
      .selectFrom('deliveries')
      .select(['url', 'status'])
      .where('event_id', '=', events[0]?.id as string)
      .orderBy('url')
      .execute();
    expect(deliveries).toEqual([
      { url: 'https://93.184.216.34/a/', status: 'pending' },
      { url: 'https://93.184.216.34/b/', status: 'pending' },
    ]);
  });

  it('wakes the delivery workers when a session writes deliveries, and only then', async () => {
    let wakes = 0;
    const stop = await database.listen(WAKE_CHANNEL, () => {
      wakes++;
    });
    try {
      wakes = 0; // PostgreSQL's listener wakes once when it starts
      const settle = () => new Promise((resolve) => setTimeout(resolve, 300));
      expect((await post(session(), OTHER)).status).toBe(201); // biz-b registered no URL
      await settle();
      expect(wakes).toBe(0);
      expect((await post(session())).status).toBe(201);
      await expect.poll(() => wakes, { timeout: 5000 }).toBe(1);
      await settle();
      expect(wakes).toBe(1);
    } finally {
      await stop();
    }
  });

  it('fetches a payment by id; 404 for an unknown or malformed id, or another business', async () => {
    const { data } = (await (await post(session())).json()) as Answer;
    const res = await get(`/payments/${data.payment.id}`);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { data: unknown }).data).toEqual(data.payment);
    for (const [path, key] of [
      [`/payments/${crypto.randomUUID()}`, KEY],
      ['/payments/not-a-uuid', KEY],
      [`/payments/${data.payment.id}`, OTHER],
    ] as const) {
      const missing = await get(path, key);
      expect(missing.status, path).toBe(404);
      expect(((await missing.json()) as Answer).error?.code).toBe('not_found');
    }
  });

  it('takes an existing customer by customer_id, of this account only', async () => {
    const created = (await (
      await fetch(`${url}/customers`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify(customer),
      })
    ).json()) as { data: { id: string } };
    const { customer: _c, ...rest } = session();
    const ok = await post({ ...rest, customer_id: created.data.id });
    expect(ok.status).toBe(201);
    expect((((await ok.json()) as Answer).data.payment.customer as { id: string }).id).toBe(created.data.id);
    const foreign = await post({ ...rest, customer_id: created.data.id }, OTHER);
    expect(foreign.status).toBe(422);
    expect(((await foreign.json()) as Answer).error?.details.map((d) => d.field)).toEqual(['customer_id']);
  });

  it.each([
    ['an amount under 100000', session({ amount: 99999 }), 'amount'],
    ['a string amount', session({ amount: '250000' }), 'amount'],
    ['an unsupported currency', session({ currency: 'EUR' }), 'currency'],
    [
      'both customer and customer_id',
      session({ customer_id: '3b2a1c0d-9e8f-4a7b-8c6d-5e4f3a2b1c0d' }),
      'customer',
    ],
    ['neither customer nor customer_id', (({ customer: _c, ...rest }) => rest)(session()), 'customer'],
    [
      'an unknown payment method type',
      session({ payment_method: { type: 'cheque' } }),
      'payment_method.type',
    ],
    ['no description', (({ description: _d, ...rest }) => rest)(session()), 'description'],
    ['a customer without email', session({ customer: { ...customer, email: undefined } }), 'customer.email'],
    ['metadata without an order', session({ metadata: {} }), 'metadata.order'],
    ['an outgoing direction', session({ direction: 'outgoing' }), 'direction'],
  ])('refuses %s with 422 naming the field', async (_name, body, field) => {
    const res = await post(body);
    expect(res.status).toBe(422);
    const { error } = (await res.json()) as Answer;
    expect(error?.code).toBe('validation_failed');
    expect(error?.details.map((d) => d.field)).toContain(field);
  });

  /** The session body with `amount` (and any other field) written as raw JSON number tokens. */
  const rawSession = (tokens: Record<string, string>) => {
    let text = JSON.stringify(session(Object.fromEntries(Object.keys(tokens).map((k) => [k, `@${k}@`]))));
    for (const [key, token] of Object.entries(tokens)) text = text.replace(`"@${key}@"`, token);
    return text;
  };
  const postRaw = (text: string) =>
    fetch(`${url}/payment-sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: text,
    });

  it.each([
    ['9007199254740993 (read as ...992)', '9007199254740993'],
    ['9007199254740992 (2^53, not a safe integer)', '9007199254740992'],
    ['9007199254740993.0', '9007199254740993.0'],
    ['1e308', '1e308'],
    ['1E400 (read as Infinity)', '1E400'],
    ['-1e400', '-1e400'],
    ['100000.00000000000001 (read as 100000)', '100000.00000000000001'],
    ['a fraction', '150000.5'],
    ['a negative amount', '-150000'],
    ['99999999999999999999', '99999999999999999999'],
  ])('refuses an amount of %s with 422 naming amount, and creates nothing', async (_name, token) => {
    const before = Number(
      (
        await database.db
          .selectFrom('payments')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );
    const res = await postRaw(rawSession({ amount: token }));
    expect(res.status).toBe(422);
    const { error } = (await res.json()) as Answer;
    expect(error?.code).toBe('validation_failed');
    expect(error?.details.map((d) => d.field)).toEqual(['amount']);
    const after = await database.db
      .selectFrom('payments')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow();
    expect(Number(after.n)).toBe(before);
  });

  it.each([
    ['the largest amount, 9007199254740991', '9007199254740991', 9007199254740991],
    ['an exponent', '1.5e5', 150000],
    ['a zero fraction', '150000.000', 150000],
  ])('accepts %s and stores it exactly', async (_name, token, amount) => {
    const res = await postRaw(rawSession({ amount: token }));
    expect(res.status).toBe(201);
    const created = (await res.json()) as Answer;
    expect(created.data.payment.amount).toBe(amount);
    const stored = await get(`/payments/${created.data.payment.id}`);
    const text = await stored.text();
    expect(text).toContain(`"amount":${amount}`);
  });

  it('refuses a whole number elsewhere in the body that would be changed, naming its field', async () => {
    const res = await postRaw(
      rawSession({ metadata: '{"order":{"identifier":"ORD-1","items":[]},"ref":12345678901234567890}' }),
    );
    expect(res.status).toBe(422);
    const { error } = (await res.json()) as Answer;
    expect(error?.details.map((d) => d.field)).toEqual(['metadata.ref']);
    // What parses to itself is taken as sent: 1e20 is exactly 10^20.
    const exact = await postRaw(
      rawSession({ metadata: '{"order":{"identifier":"ORD-1","items":[]},"ref":1e20,"ratio":0.1}' }),
    );
    expect(exact.status).toBe(201);
  });

  it('answers 400 to a body that is not a JSON object', async () => {
    for (const body of ['[]', '"x"', '{"amount":']) {
      const res = await fetch(`${url}/payment-sessions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
        body,
      });
      expect(res.status, body).toBe(400);
    }
  });

  it('accepts the stablecoin spelling "crypto address"', async () => {
    expect(
      (await post(session({ currency: 'USD', payment_method: { type: 'crypto address' } }))).status,
    ).toBe(201);
  });

  it('refuses a second session with the same reference with 409, and writes nothing for it', async () => {
    expect((await post(session({ reference: 'ref-dup' }))).status).toBe(201);
    const count = async () =>
      (
        await database.db
          .selectFrom('events')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .executeTakeFirstOrThrow()
      ).n;
    const before = await count();
    const res = await post(
      session({ reference: 'ref-dup', customer: { ...customer, first_name: 'Rolled back' } }),
    );
    expect(res.status).toBe(409);
    expect(((await res.json()) as Answer).error?.code).toBe('duplicate_reference');
    expect(await count()).toBe(before);
    const rolledBack = await database.db
      .selectFrom('customers')
      .select('id')
      .where('first_name', '=', 'Rolled back')
      .execute();
    expect(rolledBack).toEqual([]);
  });

  it('lists sessions newest first, filtered by status', async () => {
    const res = await get('/payments?status=pending&limit=2');
    expect(res.status).toBe(200);
    const page = (await res.json()) as {
      data: { status: string; payment: { status: string } }[];
      pagination: { after: string; limit: number };
    };
    expect(page.data).toHaveLength(2);
    expect(page.data.every((e) => e.status === 'pending' && e.payment.status === 'pending')).toBe(true);
    expect(page.pagination.after).not.toBe('');
    expect(((await (await get('/payments?status=settled')).json()) as { data: unknown[] }).data).toEqual([]);
    expect((await get('/payments?status=refunded')).status).toBe(400);
  });

  it('pages through GET /payments both ways with inserts in between, "" at the ends', async () => {
    // A business of its own, so the test knows every row.
    const ids: string[] = [];
    const insert = async () => {
      const res = await post(session(), PAGES);
      expect(res.status).toBe(201);
      ids.push(((await res.json()) as Answer).data.payment.id as string);
    };
    type Page = { ids: string[]; after: string; before: string; limit: number };
    const page = async (query: string): Promise<Page> => {
      const res = await get(`/payments?limit=2${query}`, PAGES);
      expect(res.status, query).toBe(200);
      const body = (await res.json()) as {
        data: { payment: { id: string } }[];
        pagination: { after: string; before: string; limit: number };
      };
      return { ids: body.data.map((e) => e.payment.id), ...body.pagination };
    };
    for (let i = 0; i < 5; i++) await insert(); // ids[0] oldest ... ids[4] newest
    const at = (...n: number[]) => n.map((i) => ids[i]);

    // Forwards (older): the newest page has no newer one.
    const first = await page('');
    expect(first).toMatchObject({ ids: at(4, 3), before: '', limit: 2 });
    expect(first.after).not.toBe('');
    await insert(); // ids[5], newer than everything paged so far
    const second = await page(`&after=${first.after}`);
    expect(second.ids).toEqual(at(2, 1)); // the cursor holds: no row repeated or skipped
    expect(second.after).not.toBe('');
    expect(second.before).not.toBe('');
    await insert(); // ids[6]
    const last = await page(`&after=${second.after}`);
    expect(last).toMatchObject({ ids: at(0), after: '' });
    expect(last.before).not.toBe('');

    // Backwards (newer), meeting the rows inserted meanwhile at the top.
    const back1 = await page(`&before=${last.before}`);
    expect(back1.ids).toEqual(at(2, 1));
    expect(back1.after).not.toBe('');
    const back2 = await page(`&before=${back1.before}`);
    expect(back2.ids).toEqual(at(4, 3));
    expect(back2.before).not.toBe(''); // ids[5] and ids[6] are newer now
    await insert(); // ids[7]
    const back3 = await page(`&before=${back2.before}`);
    expect(back3.ids).toEqual(at(6, 5));
    expect(back3.before).not.toBe('');
    const top = await page(`&before=${back3.before}`);
    expect(top).toMatchObject({ ids: at(7), before: '' });
    expect(top.after).not.toBe('');
    // And forwards again from the top: every row once, newest first.
    const seen: string[] = [...top.ids];
    for (let cursor = top.after; cursor !== ''; ) {
      const next = await page(`&after=${cursor}`);
      seen.push(...next.ids);
      cursor = next.after;
    }
    expect(seen).toEqual([...ids].reverse());
  });
});
