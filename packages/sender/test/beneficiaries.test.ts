// @module-tag postgres
// @module-tag pglite
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, loadConfig } from '../src/index.js';
import { ngnBeneficiary } from './fixtures/requests.js';
import { openTestDatabase, testStorages } from './fixtures/storage.js';

const address = {
  line1: '1 Main St',
  line2: '',
  city: 'Austin',
  state: 'TX',
  country: 'US',
  zip_code: '73301',
};
const ngn = ngnBeneficiary;
const usd = {
  type: 'bank_account',
  currency: 'USD',
  routing_number: '021000021',
  rail: 'ach',
  sort_code: '',
  address,
  bank_address: address,
};

describe.each(testStorages())('beneficiaries on %s', { timeout: 60_000 }, (storage) => {
  let app: FastifyInstance;
  let url: string;
  let cleanup: () => Promise<void>;
  const KEY = 'sk_test_beneficiaries_a';
  const LIVE = 'sk_live_beneficiaries_a';

  beforeAll(async () => {
    const opened = await openTestDatabase(storage, 'beneficiaries');
    cleanup = opened.cleanup;
    app = await buildApp({
      database: opened.database,
      config: loadConfig({ PAYHOOK_API_KEYS: `${KEY}:biz-a:test,${LIVE}:biz-a:live` }),
      logger: false,
    });
    url = await app.listen({ port: 0, host: '127.0.0.1' });
  }, 60_000); // PGlite's start and migrations can take longer than the default 10 s on a busy machine
  afterAll(async () => {
    await app?.close();
    await cleanup?.();
  });

  const post = (body: unknown, key = KEY) =>
    fetch(`${url}/beneficiaries`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  type Answer = { data: Record<string, unknown>; error?: { code: string; details: { field: string }[] } };

  it('creates an NGN beneficiary with every field of the spec', async () => {
    const res = await post({ ...ngn, nickname: 'ignored' });
    expect(res.status).toBe(201);
    const { data } = (await res.json()) as Answer;
    expect(data).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      user_id: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/),
      ...ngn,
      account_type: 'savings',
      bank_id: null,
      bic: null,
      routing_number: null,
      sort_code: null,
      address: null,
      bank_address: null,
      lifetime: 'permanent',
      virtual: false,
    });
  });

  it('creates a USD beneficiary', async () => {
    const res = await post(usd);
    expect(res.status).toBe(201);
    expect(((await res.json()) as Answer).data).toMatchObject({
      currency: 'USD',
      routing_number: '021000021',
      rail: 'ach',
      address,
      bank_address: address,
    });
  });

  it.each([
    ['an NGN account without bank_code', { ...ngn, bank_code: undefined }, 'bank_code'],
    ['a USD account without rail', { ...usd, rail: undefined }, 'rail'],
    [
      'a USD account whose address lacks a city',
      { ...usd, address: { ...address, city: undefined } },
      'address.city',
    ],
    ['a currency it does not pay out in', { ...ngn, currency: 'EUR' }, 'currency'],
    ['a number for the account number', { ...ngn, account_number: 123 }, 'account_number'],
  ])('refuses %s with 422 naming the field', async (_name, body, field) => {
    const res = await post(body);
    expect(res.status).toBe(422);
    const { error } = (await res.json()) as Answer;
    expect(error?.code).toBe('validation_failed');
    expect(error?.details.map((d) => d.field)).toContain(field);
  });

  it('lists them newest first, per mode', async () => {
    const res = await fetch(`${url}/beneficiaries?limit=1`, { headers: { authorization: `Bearer ${KEY}` } });
    const page = (await res.json()) as {
      data: { currency: string }[];
      pagination: { after: string; before: string };
    };
    expect(page.data.map((b) => b.currency)).toEqual(['USD']);
    expect(page.pagination.before).toBe('');
    expect(page.pagination.after).not.toBe('');
    const live = await fetch(`${url}/beneficiaries`, { headers: { authorization: `Bearer ${LIVE}` } });
    expect(((await live.json()) as { data: unknown[] }).data).toEqual([]);
  });
});
