// @module-tag postgres
// @module-tag pglite
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestApp, type TestApp } from './fixtures/app.js';
import { customer as baseCustomer, sessionRequest } from './fixtures/requests.js';
import { testStorages } from './fixtures/storage.js';

const customer = (n: number) => ({
  ...baseCustomer,
  first_name: `Ada${n}`,
  last_name: n % 2 ? '' : 'Okafor',
  email: `ada${n}@example.com`,
});

describe.each(testStorages())('customers on %s', { timeout: 60_000 }, (storage) => {
  let url: string;
  const KEY = 'sk_test_customers_a';
  const OTHER = 'sk_test_customers_b';

  let testApp: TestApp | undefined;
  // PGlite's start and migrations can take longer than the default 10 s on a busy machine.
  beforeAll(async () => {
    testApp = await startTestApp(storage, 'customers', {
      PAYHOOK_API_KEYS: `${KEY}:biz-a:test,${OTHER}:biz-b:test`,
    });
    ({ url } = testApp);
  }, 60_000);
  afterAll(() => testApp?.close());

  const post = (body: unknown, key = KEY) =>
    fetch(`${url}/customers`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  type Page = {
    data: { id: string; first_name: string }[];
    pagination: { after: string; before: string; limit: number };
  };
  const list = async (query = '', key = KEY): Promise<Page> => {
    const res = await fetch(`${url}/customers/${query}`, { headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(200);
    return (await res.json()) as Page;
  };

  it('creates a customer: 201 with its id', async () => {
    const res = await post({ ...customer(0), unknown_field: true });
    expect(res.status).toBe(201);
    const { data } = (await res.json()) as { data: Record<string, unknown> };
    expect(data).toEqual({ id: expect.stringMatching(/^[0-9a-f-]{36}$/), ...customer(0) });
  });

  it.each([
    [
      'no email',
      (() => {
        const { email: _e, ...rest } = customer(1);
        return rest;
      })(),
      'email',
    ],
    ['a number for a name', { ...customer(1), first_name: 7 }, 'first_name'],
    [
      'no billing city',
      { ...customer(1), billing_address: { ...customer(1).billing_address, city: undefined } },
      'billing_address.city',
    ],
  ])('refuses %s with 422 naming the field', async (_name, body, field) => {
    const res = await post(body);
    expect(res.status).toBe(422);
    const error = ((await res.json()) as { error: { code: string; details: { field: string }[] } }).error;
    expect(error.code).toBe('validation_failed');
    expect(error.details.map((d) => d.field)).toContain(field);
  });

  it('pages newest first in both directions, stable while rows are inserted, with empty cursors at the ends', async () => {
    for (let n = 1; n <= 7; n++) expect((await post(customer(n), OTHER)).status).toBe(201);
    const first = await list('?limit=3', OTHER);
    expect(first.data.map((c) => c.first_name)).toEqual(['Ada7', 'Ada6', 'Ada5']);
    expect(first.pagination).toMatchObject({ before: '', limit: 3 });
    // Rows inserted meanwhile appear on no older page.
    await post(customer(8), OTHER);
    const second = await list(`?limit=3&after=${first.pagination.after}`, OTHER);
    expect(second.data.map((c) => c.first_name)).toEqual(['Ada4', 'Ada3', 'Ada2']);
    const third = await list(`?limit=3&after=${second.pagination.after}`, OTHER);
    expect(third.data.map((c) => c.first_name)).toEqual(['Ada1']);
    expect(third.pagination.after).toBe('');
    const back = await list(`?limit=3&before=${third.pagination.before}`, OTHER);
    expect(back.data.map((c) => c.first_name)).toEqual(['Ada4', 'Ada3', 'Ada2']);
    const top = await list(`?limit=3&before=${second.pagination.before}`, OTHER);
    expect(top.data.map((c) => c.first_name)).toEqual(['Ada7', 'Ada6', 'Ada5']);
    // The row inserted after the first page is newer still.
    expect(top.pagination.before).not.toBe('');
    expect(
      (await list(`?limit=3&before=${top.pagination.before}`, OTHER)).data.map((c) => c.first_name),
    ).toEqual(['Ada8']);
    expect((await list('', OTHER)).pagination.limit).toBe(15);
  });

  it('shows each business only its own customers', async () => {
    const mine = await list('?limit=100');
    expect(mine.data.every((c) => !/^Ada[1-8]$/.test(c.first_name))).toBe(true);
  });

  const REFUSED_EMAILS = [
    'ada@example.com\r\nBcc: eve@example.com',
    'ada@example.com\n',
    'ada\r@example.com',
    'ada@exa\tmple.com',
    'ada @example.com',
    'ada@example.com\u200b',
    'ada@@example.com',
    'ada@example@example.com',
    'ada.example.com',
    '@example.com',
    'ada@',
    'ada@localhost',
    'ada@example.',
    'ada@.example.com',
    'ada@example..com',
    'ada@-example.com',
    'ada@example-.com',
    'ada@exam_ple.com',
    'ada@[10.0.0.1]',
    'ada@10.0.0.1',
    `${'a'.repeat(65)}@example.com`,
    `ada@${'a'.repeat(64)}.com`,
    `ada@${'abcdefghi.'.repeat(25)}com`,
    '',
  ];
  const ACCEPTED_EMAILS = [
    'ada@example.com',
    'ada.obi+orders@mail.example.co.uk',
    "o'brien@example.ie",
    'ñandú@例え.jp',
    'ada@xn--bcher-kva.example',
    `${'a'.repeat(64)}@example.com`,
  ];

  it.each(REFUSED_EMAILS)('refuses the email %j with 422 naming it, here and in a session', async (email) => {
    const res = await post({ ...customer(2), email });
    expect(res.status).toBe(422);
    const error = ((await res.json()) as { error: { code: string; details: { field: string }[] } }).error;
    expect(error.code).toBe('validation_failed');
    expect(error.details.map((d) => d.field)).toEqual(['email']);
    const session = await fetch(`${url}/payment-sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...sessionRequest, customer: { ...customer(2), email } }),
    });
    expect(session.status).toBe(422);
    const sessionError = ((await session.json()) as { error: { details: { field: string }[] } }).error;
    expect(sessionError.details.map((d) => d.field)).toEqual(['customer.email']);
  });

  it.each(ACCEPTED_EMAILS)('accepts the email %j', async (email) => {
    const res = await post({ ...customer(3), email });
    expect(res.status).toBe(201);
    expect(((await res.json()) as { data: { email: string } }).data.email).toBe(email);
  });

  it.each([
    ['?limit=0', 'limit', 'invalid_request'],
    ['?limit=101', 'limit', 'invalid_request'],
    ['?limit=abc', 'limit', 'invalid_request'],
    ['?after=not-a-cursor', 'after', 'invalid_cursor'],
    ['?after=x&before=y', 'before', 'invalid_request'],
  ])('answers %s with 400 naming the parameter', async (query, field, code) => {
    const res = await fetch(`${url}/customers/${query}`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(res.status).toBe(400);
    const error = ((await res.json()) as { error: { code: string; details: { field: string }[] } }).error;
    expect(error.code).toBe(code);
    expect(error.details.map((d) => d.field)).toContain(field);
  });

  it('says what a limit is, and lists the allowed values of an enumerated parameter once', async () => {
    const get = async (path: string) =>
      (
        (await (await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${KEY}` } })).json()) as {
          error: { details: { field: string; message: string }[] };
        }
      ).error.details;
    for (const limit of ['abc', '0', '101']) {
      expect(await get(`/customers/?limit=${limit}`)).toEqual([
        { field: 'limit', message: 'must be an integer from 1 to 100 (the page size; default 15)' },
      ]);
    }
    expect(await get('/payments?status=weird')).toEqual([
      { field: 'status', message: 'must be one of pending, captured, settled, failed' },
    ]);
  });
});
