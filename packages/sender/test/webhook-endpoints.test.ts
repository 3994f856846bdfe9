// @module-tag postgres
// @module-tag pglite
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient } from '../../../test/support/api-client.js';
import { buildApp, type Database, loadConfig } from '../src/index.js';
import { openTestDatabase, testStorages } from './fixtures/storage.js';

const EVENTS = ['payment.session.created', 'payment.session.succeeded', 'payment.session.failed'];

describe.each(testStorages())('/webhook-endpoints on %s', { timeout: 60_000 }, (storage) => {
  let app: FastifyInstance;
  let base: string;
  let database: Database;
  let cleanup: () => Promise<void>;
  const KEY = `sk_test_endpoints_${storage}`;
  const LIVE = `sk_live_endpoints_${storage}`;
  const OTHER = `sk_test_endpoints_other_${storage}`;

  beforeAll(async () => {
    ({ database, cleanup } = await openTestDatabase(storage, 'endpoints'));
    app = await buildApp({
      database,
      config: loadConfig({
        PAYHOOK_API_KEYS: `${KEY}:biz-ep:test,${LIVE}:biz-ep:live,${OTHER}:biz-ep-other:test`,
      }),
      logger: false,
      // Names resolve to a public address, except the ones a test makes private.
      resolve: async (host: string) =>
        host.endsWith('.internal.example') ? ['10.0.0.7'] : ['93.184.216.34'],
    });
    base = await app.listen({ port: 0, host: '127.0.0.1' });
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await cleanup?.();
  });

  const call = (
    method: string,
    path: string,
    body?: unknown,
    key = KEY,
    extra: Record<string, string> = {},
  ) =>
    // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field below
    apiClient(() => base, key)<any>(method, path, body, extra);

  it('creates, reads, lists, updates and deletes an endpoint', async () => {
    const created = await call('POST', '/webhook-endpoints', { url: 'https://crud.example/hooks' });
    expect(created.status).toBe(201);
    const endpoint = created.body.data;
    expect(endpoint).toMatchObject({
      url: 'https://crud.example/hooks',
      description: null,
      enabled_events: ['*'],
      status: 'enabled',
      disabled_reason: null,
      signature_scheme: 'v1',
      secret_scope: 'endpoint',
      rate_limit_per_second: null,
    });
    expect(endpoint.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(endpoint.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    expect((await call('GET', `/webhook-endpoints/${endpoint.id}`)).body.data).toEqual(endpoint);

    const updated = await call('PATCH', `/webhook-endpoints/${endpoint.id}`, {
      description: 'orders',
      enabled_events: ['payment.session.failed', 'payment.session.failed'],
      rate_limit_per_second: 5,
      status: 'disabled',
    });
    expect(updated.status).toBe(200);
    expect(updated.body.data).toMatchObject({
      id: endpoint.id,
      url: 'https://crud.example/hooks',
      description: 'orders',
      enabled_events: ['payment.session.failed'],
      rate_limit_per_second: 5,
      status: 'disabled',
      disabled_reason: 'manual',
    });
    expect(updated.body.data.updated_at > endpoint.updated_at).toBe(true);
    const enabled = await call('PATCH', `/webhook-endpoints/${endpoint.id}`, {
      status: 'enabled',
      description: null,
      rate_limit_per_second: null,
    });
    expect(enabled.body.data).toMatchObject({ status: 'enabled', disabled_reason: null, description: null });
    expect(enabled.body.data.rate_limit_per_second).toBeNull();

    const deleted = await call('DELETE', `/webhook-endpoints/${endpoint.id}`);
    expect(deleted).toMatchObject({ status: 200, body: { data: { id: endpoint.id, deleted: true } } });
    expect((await call('GET', `/webhook-endpoints/${endpoint.id}`)).status).toBe(404);
    expect((await call('DELETE', `/webhook-endpoints/${endpoint.id}`)).status).toBe(404);
  });

  it('lists in cursor pages, newest first, within the business and mode only', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await call('POST', '/webhook-endpoints', { url: `https://pages.example/${i}` }, LIVE);
      expect(res.status).toBe(201);
      ids.push(res.body.data.id);
    }
    const first = await call('GET', '/webhook-endpoints?limit=2', undefined, LIVE);
    expect(first.body.data.map((e: { id: string }) => e.id)).toEqual([ids[4], ids[3]]);
    expect(first.body.pagination).toMatchObject({ before: '', limit: 2 });
    const second = await call(
      'GET',
      `/webhook-endpoints?limit=2&after=${first.body.pagination.after}`,
      undefined,
      LIVE,
    );
    expect(second.body.data.map((e: { id: string }) => e.id)).toEqual([ids[2], ids[1]]);
    const back = await call(
      'GET',
      `/webhook-endpoints?limit=2&before=${second.body.pagination.before}`,
      undefined,
      LIVE,
    );
    expect(back.body.data.map((e: { id: string }) => e.id)).toEqual([ids[4], ids[3]]);
    expect((await call('GET', '/webhook-endpoints?after=nonsense', undefined, LIVE)).body.error.code).toBe(
      'invalid_cursor',
    );
    // The test mode of the same business, and another business, see none of them.
    const test = await call('GET', '/webhook-endpoints?limit=100');
    expect(test.body.data.some((e: { id: string }) => ids.includes(e.id))).toBe(false);
    const other = await call('GET', '/webhook-endpoints?limit=100', undefined, OTHER);
    expect(other.body.data.some((e: { id: string }) => ids.includes(e.id))).toBe(false);
    for (const id of ids)
      expect((await call('DELETE', `/webhook-endpoints/${id}`, undefined, LIVE)).status).toBe(200);
  });

  it('refuses unknown event types with 422 naming each, and "*" mixed with types', async () => {
    const res = await call('POST', '/webhook-endpoints', {
      url: 'https://filters.example/',
      enabled_events: ['payment.session.created', 'payment.session.refunded', 'Payment.Session.Failed'],
    });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('validation_failed');
    expect(res.body.error.details.map((d: { field: string }) => d.field)).toEqual([
      'enabled_events.1',
      'enabled_events.2',
    ]);
    expect(res.body.error.details[0].message).toContain('payment.session.refunded');
    const mixed = await call('POST', '/webhook-endpoints', {
      url: 'https://filters.example/',
      enabled_events: ['*', 'payment.session.created'],
    });
    expect(mixed.status).toBe(422);
    expect(mixed.body.error.details[0].field).toBe('enabled_events');
    const every = await call('POST', '/webhook-endpoints', {
      url: 'https://filters.example/',
      enabled_events: EVENTS,
    });
    expect(every.status).toBe(201);
    expect(every.body.data.enabled_events).toEqual(EVENTS);
    const patched = await call('PATCH', `/webhook-endpoints/${every.body.data.id}`, {
      enabled_events: ['nope'],
    });
    expect(patched.status).toBe(422);
    expect(patched.body.error.details[0]).toMatchObject({ field: 'enabled_events.0' });
    await call('DELETE', `/webhook-endpoints/${every.body.data.id}`);
  });

  it('applies the webhook URL rules of the settings, with the same messages', async () => {
    for (const url of [
      'http://127.0.0.1/hooks',
      'https://db.internal.example/hooks',
      'ftp://files.example/',
      'https://user:pw@m.example/',
    ]) {
      const endpoint = await call('POST', '/webhook-endpoints', { url });
      const settings = await call('PATCH', '/accounts/settings', { webhook_urls: [url] }, OTHER);
      expect(endpoint.status).toBe(422);
      expect(settings.status).toBe(422);
      expect(endpoint.body.error.details).toEqual([
        { field: 'url', message: settings.body.error.details[0].message },
      ]);
    }
    const created = await call('POST', '/webhook-endpoints', { url: 'https://ok.example/' });
    const patched = await call('PATCH', `/webhook-endpoints/${created.body.data.id}`, {
      url: 'http://[::1]/x',
    });
    expect(patched.status).toBe(422);
    expect(patched.body.error.details[0].field).toBe('url');
    await call('DELETE', `/webhook-endpoints/${created.body.data.id}`);
  });

  it('keeps a signature scheme fixed after creation', async () => {
    const created = await call('POST', '/webhook-endpoints', {
      url: 'https://scheme.example/',
      signature_scheme: 'v1a',
    });
    expect(created.body.data.signature_scheme).toBe('v1a');
    expect(
      (await call('PATCH', `/webhook-endpoints/${created.body.data.id}`, { signature_scheme: 'v1a' })).status,
    ).toBe(200);
    const changed = await call('PATCH', `/webhook-endpoints/${created.body.data.id}`, {
      signature_scheme: 'v1',
    });
    expect(changed.status).toBe(422);
    expect(changed.body.error.details[0].field).toBe('signature_scheme');
    await call('DELETE', `/webhook-endpoints/${created.body.data.id}`);
  });
});
