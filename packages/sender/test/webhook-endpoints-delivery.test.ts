// @module-tag postgres
// @module-tag pglite
import { createPublicKey, verify, webcrypto } from 'node:crypto';
import { readSignatureHeaders, verifyWebhookSignature } from '@payhook/core';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { apiClient } from '../../../test/support/api-client.js';
import { type LoopbackReceiver, startLoopbackReceiver } from '../../../test/support/loopback-receiver.js';
import { endpointTakes } from '../src/endpoints/filter.js';
import { createEndpoint, updateEndpoint } from '../src/endpoints/lifecycle.js';
import {
  buildApp,
  createDeliveryClient,
  createDeliveryWorker,
  type Database,
  type DeliveryWorker,
  loadConfig,
  type Resolver,
  writeEvent,
} from '../src/index.js';
import { sessionRequest } from './fixtures/requests.js';
import { openTestDatabase, testStorages } from './fixtures/storage.js';

const TYPES = ['payment.session.created', 'payment.session.succeeded', 'payment.session.failed'] as const;
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

/**
 * The worker's resolver: every host name is unknown, at once. The receivers are IP literals; the
 * other deliveries the tests write go to `.example` names (reserved: they never resolve), which
 * the system resolver may take its whole timeout to fail, seconds per attempt (up to 5 s each
 * where no DNS server answers), all of them before `runDue` returns.
 */
const noSuchHost: Resolver = async (host) => {
  throw new Error(`ENOTFOUND ${host}`);
};

/** An independent Ed25519 check of one `v1a,<sig>` entry with node:crypto, from the spec's text. */
function nodeVerifies(
  publicKey: string,
  id: string,
  timestamp: string,
  body: string,
  entry: string,
): boolean {
  const raw = Buffer.from(publicKey.slice('whpk_'.length), 'base64');
  const key = createPublicKey({ key: Buffer.concat([SPKI_PREFIX, raw]), format: 'der', type: 'spki' });
  const [version, signature] = entry.split(',');
  if (version !== 'v1a' || !signature) return false;
  return verify(null, Buffer.from(`${id}.${timestamp}.${body}`), key, Buffer.from(signature, 'base64'));
}

/** The same check with Web Crypto (`crypto.subtle`, Ed25519). */
async function webVerifies(publicKey: string, id: string, timestamp: string, body: string, entry: string) {
  const raw = Buffer.from(publicKey.slice('whpk_'.length), 'base64');
  const key = await webcrypto.subtle.importKey('raw', raw, { name: 'Ed25519' }, false, ['verify']);
  const signature = Buffer.from(entry.split(',')[1] ?? '', 'base64');
  return webcrypto.subtle.verify(
    'Ed25519',
    key,
    signature,
    new TextEncoder().encode(`${id}.${timestamp}.${body}`),
  );
}

describe.each(testStorages())('webhook endpoints and delivery on %s', { timeout: 120_000 }, (storage) => {
  let app: FastifyInstance;
  let base: string;
  let database: Database;
  let cleanup: () => Promise<void>;
  const receivers: LoopbackReceiver[] = [];
  const workers: DeliveryWorker[] = [];
  const KEY = `sk_test_epd_${storage}`;
  const OTHER = `sk_test_epd_other_${storage}`;
  let n = 0;

  beforeAll(async () => {
    ({ database, cleanup } = await openTestDatabase(storage, 'epdelivery'));
    const keys = [`${KEY}:biz-epd:test`, `${OTHER}:biz-epd-other:test`];
    for (let i = 0; i < 8; i++) keys.push(`sk_test_epd_${i}_${storage}:biz-epd-${i}:test`);
    app = await buildApp({
      database,
      config: loadConfig({ PAYHOOK_API_KEYS: keys.join(','), PAYHOOK_ALLOW_PRIVATE_WEBHOOKS: '1' }),
      logger: false,
    });
    base = await app.listen({ port: 0, host: '127.0.0.1' });
  }, 60_000);
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
    await Promise.all(receivers.splice(0).map((r) => r.close()));
  });
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

  async function receiver(): Promise<LoopbackReceiver> {
    const r = await startLoopbackReceiver({ respond: 200 });
    receivers.push(r);
    return r;
  }

  async function runWorker(): Promise<void> {
    const worker = createDeliveryWorker({
      database,
      client: createDeliveryClient({ allowPrivate: true, resolve: noSuchHost }),
    });
    workers.push(worker);
    await worker.runDue();
  }

  it('settings webhook_urls keep working: they are the URLs of every endpoint, and map onto endpoints that take every event', async () => {
    const key = `sk_test_epd_0_${storage}`;
    const a = 'https://a.example/hooks';
    const b = 'https://b.example/hooks';
    const set = await call('PATCH', '/accounts/settings', { webhook_urls: [a, b] }, key);
    expect(set.body.data).toEqual({ require_mfa: false, webhook_urls: [a, b] });
    const listed = (await call('GET', '/webhook-endpoints', undefined, key)).body.data;
    expect(listed.map((e: { url: string }) => e.url).sort()).toEqual([a, b]);
    for (const e of listed)
      expect(e).toMatchObject({ enabled_events: ['*'], secret_scope: 'account', status: 'enabled' });
    const bId = listed.find((e: { url: string }) => e.url === b).id;

    const c = await call(
      'POST',
      '/webhook-endpoints',
      { url: 'https://c.example/', enabled_events: ['payment.session.failed'] },
      key,
    );
    expect((await call('GET', '/accounts/settings', undefined, key)).body.data.webhook_urls).toEqual([
      a,
      b,
      'https://c.example/',
    ]);
    // A list that keeps b: b's endpoint stays as it is; a and c go; d comes.
    const d = 'https://d.example/hooks';
    const replaced = await call(
      'PATCH',
      '/accounts/settings',
      { webhook_urls: [b, d], require_mfa: true },
      key,
    );
    expect(replaced.body.data).toEqual({ require_mfa: true, webhook_urls: [b, d] });
    expect((await call('GET', `/webhook-endpoints/${bId}`, undefined, key)).status).toBe(200);
    expect((await call('GET', `/webhook-endpoints/${c.body.data.id}`, undefined, key)).status).toBe(404);
    // require_mfa alone leaves the URLs as they are.
    expect(
      (await call('PATCH', '/accounts/settings', { require_mfa: false }, key)).body.data.webhook_urls,
    ).toEqual([b, d]);
    expect(
      (await call('PATCH', '/accounts/settings', { webhook_urls: [] }, key)).body.data.webhook_urls,
    ).toEqual([]);
    expect((await call('GET', '/webhook-endpoints', undefined, key)).body.data).toEqual([]);
  });

  it('holds the limit of 20 endpoints per business and mode, under concurrent creations too', async () => {
    const key = `sk_test_epd_1_${storage}`;
    const answers = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        call('POST', '/webhook-endpoints', { url: `https://limit.example/${i}` }, key),
      ),
    );
    expect(answers.filter((a) => a.status === 201)).toHaveLength(20);
    const refused = answers.filter((a) => a.status !== 201);
    expect(refused).toHaveLength(4);
    for (const r of refused) expect(r.body.error).toMatchObject({ code: 'validation_failed' });
    expect((await call('GET', '/accounts/settings', undefined, key)).body.data.webhook_urls).toHaveLength(20);
    const tooMany = Array.from({ length: 21 }, (_, i) => `https://limit.example/s${i}`);
    expect((await call('PATCH', '/accounts/settings', { webhook_urls: tooMany }, key)).status).toBe(422);
  });

  it('never delivers an event to an endpoint whose filter does not take it, nor to a disabled one (random filters and events)', async () => {
    const payment = (await call('POST', '/payment-sessions', sessionRequest)).body.data.payment.id as string;
    const filter = fc.oneof(fc.constant(['*']), fc.subarray([...TYPES], { minLength: 1 }));
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ filter, enabled: fc.boolean() }), { minLength: 1, maxLength: 5 }),
        fc.array(fc.constantFrom(...TYPES), { minLength: 1, maxLength: 4 }),
        async (endpoints, events) => {
          const owner = { businessId: `biz-prop-${storage}-${n++}`, mode: 'test' as const };
          const ids = await database.db.transaction().execute(async (tx) => {
            const made: { id: string; filter: string[]; enabled: boolean }[] = [];
            for (const [i, e] of endpoints.entries()) {
              const row = await createEndpoint(tx, owner, {
                url: `https://p.example/${i}`,
                enabledEvents: e.filter,
              });
              if (!e.enabled) await updateEndpoint(tx, owner, row.id, { status: 'disabled' });
              made.push({ id: row.id, filter: [...e.filter], enabled: e.enabled });
            }
            return made;
          });
          for (const type of events) {
            const eventId = await writeEvent(database.db, { type, ...owner, payment: { id: payment } });
            const got = await database.db
              .selectFrom('deliveries')
              .select('endpoint_id')
              .where('event_id', '=', eventId)
              .execute();
            const expected = ids.filter((e) => e.enabled && endpointTakes(e.filter, type)).map((e) => e.id);
            expect(got.map((d) => d.endpoint_id).sort()).toEqual(expected.sort());
          }
        },
      ),
      { numRuns: storage === 'pglite' ? 15 : 30 },
    );
  });

  it('applies a filter change to events made after it, and redelivers only to endpoints that take the event', async () => {
    const key = `sk_test_epd_2_${storage}`;
    const failedOnly = await call(
      'POST',
      '/webhook-endpoints',
      { url: 'https://f.example/', enabled_events: ['payment.session.failed'] },
      key,
    );
    const every = await call('POST', '/webhook-endpoints', { url: 'https://all.example/' }, key);
    const first = (await call('POST', '/payment-sessions', sessionRequest, key)).body.data.payment.id;
    const eventOf = async (paymentId: string) =>
      (await call('GET', `/events?payment_id=${paymentId}`, undefined, key)).body.data[0].id as string;
    const deliveriesOf = async (eventId: string) =>
      ((await call('GET', `/events/${eventId}`, undefined, key)).body.data.deliveries as { url: string }[])
        .map((d) => d.url)
        .sort();
    const e1 = await eventOf(first);
    expect(await deliveriesOf(e1)).toEqual(['https://all.example/']);

    await call(
      'PATCH',
      `/webhook-endpoints/${failedOnly.body.data.id}`,
      { enabled_events: ['payment.session.created'] },
      key,
    );
    const e2 = await eventOf(
      (await call('POST', '/payment-sessions', sessionRequest, key)).body.data.payment.id,
    );
    expect(await deliveriesOf(e2)).toEqual(['https://all.example/', 'https://f.example/']);
    // The earlier event kept its deliveries; a redelivery of it goes where it would go now.
    expect(await deliveriesOf(e1)).toEqual(['https://all.example/']);
    const again = await call('POST', `/events/${e1}/redeliver`, undefined, key);
    expect(again.status).toBe(202);
    expect(again.body.data.deliveries.map((d: { url: string }) => d.url).sort()).toEqual([
      'https://all.example/',
      'https://f.example/',
    ]);
    // Neither endpoint takes it any more: nothing to redeliver to.
    await call(
      'PATCH',
      `/webhook-endpoints/${failedOnly.body.data.id}`,
      { enabled_events: ['payment.session.failed'] },
      key,
    );
    await call('PATCH', `/webhook-endpoints/${every.body.data.id}`, { status: 'disabled' }, key);
    const none = await call('POST', `/events/${e1}/redeliver`, undefined, key);
    expect(none.status).toBe(409);
    expect(none.body.error.code).toBe('no_webhook_urls');

    // Bulk redelivery of a failed delivery goes only while its endpoint still takes the event.
    await call(
      'PATCH',
      `/webhook-endpoints/${every.body.data.id}`,
      { status: 'enabled', enabled_events: ['payment.session.failed'] },
      key,
    );
    await database.db
      .updateTable('deliveries')
      .set({ status: 'failed', finished_at: new Date() })
      .where('event_id', '=', e2)
      .execute();
    const since = new Date(Date.now() - 3_600_000).toISOString();
    expect((await call('POST', '/events/redeliver', { since }, key)).body.data.redelivered).toBe(0);
    await call('PATCH', `/webhook-endpoints/${every.body.data.id}`, { enabled_events: ['*'] }, key);
    expect((await call('POST', '/events/redeliver', { since }, key)).body.data.redelivered).toBe(1);
  });

  it('signs a v1 endpoint with its own secret, shown to its business only, rotated with an overlap', async () => {
    const key = `sk_test_epd_3_${storage}`;
    const r = await receiver();
    const endpoint = (await call('POST', '/webhook-endpoints', { url: r.url }, key)).body.data;
    const secrets = await call('GET', `/webhook-endpoints/${endpoint.id}/signing-secrets`, undefined, key);
    expect(secrets.status).toBe(200);
    expect(secrets.headers.get('cache-control')).toBe('no-store');
    const [own] = secrets.body.data;
    expect(own).toMatchObject({ current: true, expires_at: null });
    expect(own.secret).toMatch(/^whsec_/);
    const account = (await call('GET', '/accounts/signing-secrets', undefined, key)).body.data[0].secret;
    expect(own.secret).not.toBe(account);

    await call('POST', '/payment-sessions', sessionRequest, key);
    await runWorker();
    const request = r.received.at(-1);
    if (!request) throw new Error('nothing delivered');
    const headers = readSignatureHeaders(request.headers as Record<string, string>);
    expect(verifyWebhookSignature(headers, request.body, { secrets: [own.secret] }).ok).toBe(true);
    expect(verifyWebhookSignature(headers, request.body, { secrets: [account] }).ok).toBe(false);

    const rotated = await call(
      'POST',
      `/webhook-endpoints/${endpoint.id}/signing-secrets/rotate`,
      { overlap_seconds: 600 },
      key,
    );
    expect(rotated.status).toBe(200);
    expect(rotated.headers.get('cache-control')).toBe('no-store');
    expect(rotated.body.data).toHaveLength(2);
    const [fresh, previous] = rotated.body.data;
    expect(previous.secret).toBe(own.secret);
    expect(previous.expires_at).not.toBeNull();
    await call('POST', '/payment-sessions', sessionRequest, key);
    await runWorker();
    const next = r.received.at(-1);
    if (!next) throw new Error('nothing delivered');
    expect(String(next.headers['webhook-signature']).split(' ')).toHaveLength(2);
    const h = readSignatureHeaders(next.headers as Record<string, string>);
    expect(verifyWebhookSignature(h, next.body, { secrets: [fresh.secret] }).ok).toBe(true);
    expect(verifyWebhookSignature(h, next.body, { secrets: [own.secret] }).ok).toBe(true);
  });

  it('signs a v1a endpoint with Ed25519: its business sees only the public key, which verifies every attempt, through a rotation', async () => {
    const key = `sk_test_epd_4_${storage}`;
    const r = await receiver();
    const endpoint = (await call('POST', '/webhook-endpoints', { url: r.url, signature_scheme: 'v1a' }, key))
      .body.data;
    const shown = await call('GET', `/webhook-endpoints/${endpoint.id}/signing-secrets`, undefined, key);
    expect(shown.headers.get('cache-control')).toBe('no-store');
    expect(shown.text).not.toContain('whsk_');
    const [first] = shown.body.data;
    expect(first.public_key).toMatch(/^whpk_[A-Za-z0-9+/]{43}=$/);
    expect(first.secret).toBeUndefined();

    await call('POST', '/payment-sessions', sessionRequest, key);
    await runWorker();
    const request = r.received.at(-1);
    if (!request) throw new Error('nothing delivered');
    const id = String(request.headers['webhook-id']);
    const ts = String(request.headers['webhook-timestamp']);
    const header = String(request.headers['webhook-signature']);
    expect(header).toMatch(/^v1a,[A-Za-z0-9+/]{86}==$/);
    expect(nodeVerifies(first.public_key, id, ts, request.body, header)).toBe(true);
    expect(await webVerifies(first.public_key, id, ts, request.body, header)).toBe(true);
    // A byte changed anywhere fails.
    expect(nodeVerifies(first.public_key, id, ts, `${request.body} `, header)).toBe(false);
    // The receivers' own check, with the public key only.
    const headers = readSignatureHeaders(request.headers as Record<string, string>);
    expect(verifyWebhookSignature(headers, request.body, { publicKeys: [first.public_key] })).toMatchObject({
      ok: true,
      scheme: 'v1a',
    });

    const rotated = await call('POST', `/webhook-endpoints/${endpoint.id}/signing-secrets/rotate`, {}, key);
    expect(rotated.text).not.toContain('whsk_');
    const [fresh, previous] = rotated.body.data;
    expect(previous.public_key).toBe(first.public_key);
    expect(fresh.public_key).not.toBe(first.public_key);
    await call('POST', '/payment-sessions', sessionRequest, key);
    await runWorker();
    const next = r.received.at(-1);
    if (!next) throw new Error('nothing delivered');
    const entries = String(next.headers['webhook-signature']).split(' ');
    expect(entries).toHaveLength(2);
    const nid = String(next.headers['webhook-id']);
    const nts = String(next.headers['webhook-timestamp']);
    for (const pk of [fresh.public_key, previous.public_key]) {
      expect(entries.filter((e) => nodeVerifies(pk, nid, nts, next.body, e))).toHaveLength(1);
    }
    expect(await webVerifies(fresh.public_key, nid, nts, next.body, entries[0] as string)).toBe(true);
  });

  it('signs an endpoint made through webhook_urls with the business secrets, which it cannot rotate on its own', async () => {
    const key = `sk_test_epd_5_${storage}`;
    await call('PATCH', '/accounts/settings', { webhook_urls: ['https://shared.example/'] }, key);
    const [endpoint] = (await call('GET', '/webhook-endpoints', undefined, key)).body.data;
    const account = (await call('GET', '/accounts/signing-secrets', undefined, key)).body.data;
    expect(
      (await call('GET', `/webhook-endpoints/${endpoint.id}/signing-secrets`, undefined, key)).body.data,
    ).toEqual(account);
    const rotate = await call('POST', `/webhook-endpoints/${endpoint.id}/signing-secrets/rotate`, {}, key);
    expect(rotate.status).toBe(409);
    expect(rotate.body.error.code).toBe('invalid_state');
  });

  it("answers 404 for another business's endpoint on every route, and changes nothing", async () => {
    const key = `sk_test_epd_6_${storage}`;
    const endpoint = (await call('POST', '/webhook-endpoints', { url: 'https://mine.example/' }, key)).body
      .data;
    const paths: [string, string, unknown?][] = [
      ['GET', `/webhook-endpoints/${endpoint.id}`],
      ['PATCH', `/webhook-endpoints/${endpoint.id}`, { status: 'disabled', url: 'https://theirs.example/' }],
      ['DELETE', `/webhook-endpoints/${endpoint.id}`],
      ['GET', `/webhook-endpoints/${endpoint.id}/signing-secrets`],
      ['POST', `/webhook-endpoints/${endpoint.id}/signing-secrets/rotate`, {}],
    ];
    for (const [method, path, body] of paths) {
      for (const k of [OTHER, `sk_test_epd_7_${storage}`]) {
        const res = await call(method, path, body, k);
        expect(res.status, `${method} ${path}`).toBe(404);
        expect(res.body.error.code).toBe('not_found');
      }
    }
    for (const id of ['not-a-uuid', 'x'.repeat(300), '00000000-0000-0000-0000-000000000000']) {
      expect((await call('GET', `/webhook-endpoints/${id}`, undefined, key)).status).toBe(404);
    }
    expect((await call('GET', `/webhook-endpoints/${endpoint.id}`, undefined, key)).body.data).toMatchObject({
      url: 'https://mine.example/',
      status: 'enabled',
    });
    expect((await call('GET', '/webhook-endpoints', undefined, OTHER)).body.data).toEqual([]);
  });

  it('replays a POST with its Idempotency-Key: one endpoint, the same answer', async () => {
    const key = `sk_test_epd_7_${storage}`;
    const body = { url: 'https://idem.example/', enabled_events: ['payment.session.succeeded'] };
    const headers = { 'idempotency-key': `create-${storage}` };
    const first = await call('POST', '/webhook-endpoints', body, key, headers);
    const second = await call('POST', '/webhook-endpoints', body, key, headers);
    expect(first.status).toBe(201);
    expect(second.status).toBe(201);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.text).toBe(first.text);
    const all = (await call('GET', '/webhook-endpoints', undefined, key)).body.data;
    expect(all.filter((e: { url: string }) => e.url === 'https://idem.example/')).toHaveLength(1);
    const reused = await call(
      'POST',
      '/webhook-endpoints',
      { ...body, url: 'https://other.example/' },
      key,
      headers,
    );
    expect(reused.status).toBe(422);
    expect(reused.body.error.code).toBe('idempotency_key_reused');
  });
});
