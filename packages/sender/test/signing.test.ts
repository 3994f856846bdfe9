// @module-tag postgres
// @module-tag pglite
import { parseSigningSecret, verifyWebhookSignature } from '@payhook/core';
import type { FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type LoopbackReceiver, startLoopbackReceiver } from '../../../test/support/loopback-receiver.js';
import {
  buildApp,
  createApiKey,
  createDeliveryClient,
  createDeliveryMetrics,
  createDeliveryWorker,
  type Database,
  type DeliveryWorker,
  loadConfig,
} from '../src/index.js';
import { sessionRequest } from './fixtures/requests.js';
import { openTestDatabase, testStorages } from './fixtures/storage.js';

describe.each(testStorages())('signing secrets on %s', { timeout: 60_000 }, (storage) => {
  let app: FastifyInstance;
  let base: string;
  let database: Database;
  let cleanup: () => Promise<void>;
  const logs: string[] = [];
  const BIZ = `biz-signing-${storage}`;
  const KEY = `sk_test_signing_${storage}`;
  const LIVE = `sk_live_signing_${storage}`;
  const OTHER = `sk_test_signing_other_${storage}`;
  const receivers: LoopbackReceiver[] = [];
  const workers: DeliveryWorker[] = [];

  beforeAll(async () => {
    ({ database, cleanup } = await openTestDatabase(storage, 'signing'));
    app = await buildApp({
      database,
      metrics: createDeliveryMetrics(database),
      config: loadConfig({
        PAYHOOK_API_KEYS: `${KEY}:${BIZ}:test,${LIVE}:${BIZ}:live,${OTHER}:biz-other-${storage}:test`,
        PAYHOOK_ALLOW_PRIVATE_WEBHOOKS: '1',
      }),
      // Every log line of the API, at every level, to check that no secret is ever written.
      logger: {
        level: 'trace',
        stream: { write: (line: string) => logs.push(line) },
      },
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

  async function call(method: string, path: string, body?: unknown, key = KEY, extra = {}) {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...extra,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field below
    const json: any = await res.json();
    return { status: res.status, body: json, headers: res.headers };
  }

  const secretsOf = async (key = KEY) => {
    const res = await call('GET', '/accounts/signing-secrets', undefined, key);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    return res.body.data as {
      secret: string;
      current: boolean;
      created_at: string;
      expires_at: string | null;
    }[];
  };

  /** Delivers one new event to a fresh receiver and returns the request it got. */
  async function deliverOne() {
    const receiver = await startLoopbackReceiver({ respond: 200 });
    receivers.push(receiver);
    expect((await call('PATCH', '/accounts/settings', { webhook_urls: [receiver.url] })).status).toBe(200);
    const created = await call('POST', '/payment-sessions', sessionRequest);
    expect(created.status).toBe(201);
    const worker = createDeliveryWorker({ database, client: createDeliveryClient({ allowPrivate: true }) });
    workers.push(worker);
    await worker.runDue();
    const request = receiver.received.at(-1);
    if (!request) throw new Error('the receiver got nothing');
    return { request, paymentId: created.body.data.payment.id as string };
  }

  const verify = (
    request: { headers: Record<string, unknown>; body: string },
    secrets: string[],
  ): ReturnType<typeof verifyWebhookSignature> =>
    verifyWebhookSignature(
      {
        id: request.headers['webhook-id'] as string,
        timestamp: request.headers['webhook-timestamp'] as string,
        signature: request.headers['webhook-signature'] as string,
      },
      request.body,
      { secrets },
    );

  it('gives each business and mode one current secret of at least 24 random bytes, from the start', async () => {
    const test = await secretsOf();
    expect(test).toHaveLength(1);
    expect(test[0]?.current).toBe(true);
    expect(test[0]?.expires_at).toBeNull();
    expect(parseSigningSecret(test[0]?.secret as string).key.length).toBeGreaterThanOrEqual(24);
    const live = await secretsOf(LIVE);
    const other = await secretsOf(OTHER);
    expect(live[0]?.secret).not.toBe(test[0]?.secret);
    expect(other[0]?.secret).not.toBe(test[0]?.secret);
    // Read again: the same secret, not a new one each time.
    expect((await secretsOf())[0]?.secret).toBe(test[0]?.secret);
  });

  it('makes a secret with each key created for a new business', async () => {
    const key = await createApiKey(database.db, { businessId: `biz-new-${storage}`, mode: 'test' });
    const rows = await database.db
      .selectFrom('signing_secrets')
      .select('secret')
      .where('business_id', '=', `biz-new-${storage}`)
      .execute();
    expect(rows).toHaveLength(1);
    // Stored sealed (secrets-at-rest.test.ts): the table never holds the secret itself.
    const [shown] = await secretsOf(key);
    expect(rows[0]?.secret).toMatch(/^v1:/);
    expect(rows[0]?.secret).not.toContain(String(shown?.secret).slice(6));
  });

  it('signs every attempt with Standard Webhooks headers; the body and its checksum stay as they were', async () => {
    const [current] = await secretsOf();
    const { request } = await deliverOne();
    const eventId = request.headers['payhook-event-id'];
    expect(request.headers['webhook-id']).toBe(eventId);
    const timestamp = Number(request.headers['webhook-timestamp']);
    expect(Math.abs(timestamp - Date.now() / 1000)).toBeLessThan(60);
    expect(String(request.headers['webhook-signature'])).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(verify(request, [current?.secret as string])).toMatchObject({ ok: true, id: eventId });
    // Another business's secret does not verify it.
    expect(verify(request, [(await secretsOf(OTHER))[0]?.secret as string]).ok).toBe(false);
    const stored = await database.db
      .selectFrom('events')
      .select('payload')
      .where('id', '=', String(eventId))
      .executeTakeFirstOrThrow();
    expect(request.body).toBe(stored.payload);
  });

  it('keeps webhook-id across attempts and redeliveries, with a fresh timestamp and signature each time', async () => {
    const { request: first } = await deliverOne();
    const eventId = String(first.headers['webhook-id']);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const redelivered = await call('POST', `/events/${eventId}/redeliver`);
    expect(redelivered.status).toBe(202);
    const worker = createDeliveryWorker({ database, client: createDeliveryClient({ allowPrivate: true }) });
    workers.push(worker);
    await worker.runDue();
    const receiver = receivers.at(-1) as LoopbackReceiver;
    const again = receiver.received.filter((r) => r.headers['webhook-id'] === eventId);
    expect(again).toHaveLength(2);
    expect(again[1]?.headers['webhook-timestamp']).not.toBe(again[0]?.headers['webhook-timestamp']);
    expect(again[1]?.headers['webhook-signature']).not.toBe(again[0]?.headers['webhook-signature']);
    expect(again[1]?.body).toBe(again[0]?.body);
  });

  it('rotates: a new current secret, the previous one signed with for 24 hours, both signatures on each attempt', async () => {
    const [before] = await secretsOf();
    const rotated = await call('POST', '/accounts/signing-secrets/rotate');
    expect(rotated.status).toBe(200);
    const [current, previous] = rotated.body.data;
    expect(current.current).toBe(true);
    expect(current.secret).not.toBe(before?.secret);
    expect(previous.secret).toBe(before?.secret);
    // In the API's one timestamp format: ISO 8601 UTC with microseconds.
    for (const stamp of [current.created_at, previous.created_at, previous.expires_at])
      expect(stamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    expect(current.expires_at).toBeNull();
    const overlap = Date.parse(previous.expires_at) - Date.now();
    expect(overlap).toBeGreaterThan(23.9 * 3600_000);
    expect(overlap).toBeLessThanOrEqual(24 * 3600_000);

    const { request } = await deliverOne();
    const listed = String(request.headers['webhook-signature']).split(' ');
    expect(listed).toHaveLength(2);
    // A receiver holding either secret, or both, accepts the attempt.
    expect(verify(request, [current.secret])).toMatchObject({ ok: true });
    expect(verify(request, [previous.secret])).toMatchObject({ ok: true });
    expect(verify(request, [previous.secret, current.secret])).toMatchObject({ ok: true, secretIndex: 0 });
  });

  it('ends the previous secret at once with overlap_seconds 0 (a secret that leaked)', async () => {
    const [before] = await secretsOf();
    const rotated = await call('POST', '/accounts/signing-secrets/rotate', { overlap_seconds: 0 });
    expect(rotated.status).toBe(200);
    expect(rotated.body.data.map((s: { secret: string }) => s.secret)).not.toContain(before?.secret);
    const { request } = await deliverOne();
    // One signature per secret still valid (earlier rotations' overlaps), none with the ended one.
    expect(String(request.headers['webhook-signature']).split(' ')).toHaveLength(rotated.body.data.length);
    expect(verify(request, [before?.secret as string]).ok).toBe(false);
    expect(verify(request, [rotated.body.data[0].secret]).ok).toBe(true);
  });

  it('keeps at most five valid secrets, one current, through concurrent rotations', async () => {
    const answers = await Promise.all(
      Array.from({ length: 8 }, () => call('POST', '/accounts/signing-secrets/rotate', null, LIVE)),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(8).fill(200));
    const valid = await secretsOf(LIVE);
    expect(valid).toHaveLength(5);
    expect(valid.filter((s) => s.current)).toHaveLength(1);
    const made = await database.db
      .selectFrom('signing_secrets')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('business_id', '=', BIZ)
      .where('mode', '=', 'live')
      .executeTakeFirstOrThrow();
    // The first secret and one per rotation: no rotation was lost or doubled.
    expect(Number(made.n)).toBe(9);
  });

  it('replays a rotation under its Idempotency-Key instead of rotating twice', async () => {
    const headers = { 'idempotency-key': `rotate-${storage}` };
    const first = await call('POST', '/accounts/signing-secrets/rotate', {}, OTHER, headers);
    const again = await call('POST', '/accounts/signing-secrets/rotate', {}, OTHER, headers);
    expect(first.status).toBe(200);
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect((await secretsOf(OTHER))[0]?.secret).toBe(first.body.data[0].secret);
  });

  it.each([
    [{ overlap_seconds: -1 }],
    [{ overlap_seconds: 604801 }],
    [{ overlap_seconds: 1.5 }],
    [{ overlap_seconds: '60' }],
    [{ overlap: 60 }],
    [[]],
    ['now'],
  ])('refuses the rotation body %j with a 4xx in the error shape, rotating nothing', async (body) => {
    const [before] = await secretsOf(OTHER);
    const res = await call('POST', '/accounts/signing-secrets/rotate', body, OTHER);
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
    expect(typeof res.body.error.code).toBe('string');
    expect((await secretsOf(OTHER))[0]?.secret).toBe(before?.secret);
  });

  it('needs an API key, and shows a business only its own secrets', async () => {
    const anonymous = await fetch(`${base}/accounts/signing-secrets`);
    expect(anonymous.status).toBe(401);
    const mine = (await secretsOf()).map((s) => s.secret);
    const theirs = (await secretsOf(OTHER)).map((s) => s.secret);
    expect(mine.filter((s) => theirs.includes(s))).toEqual([]);
  });

  it('never writes a secret to the logs or /metrics, and documents both routes in OpenAPI', async () => {
    // Every secret valid now, opened (the table keeps them sealed).
    const secrets = (await Promise.all([KEY, LIVE, OTHER].map((key) => secretsOf(key)))).flat();
    expect(secrets.length).toBeGreaterThan(5);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    const openapi = (await (await fetch(`${base}/openapi.json`)).json()) as {
      paths: Record<string, { post: { summary: string } }>;
    };
    expect(logs.length).toBeGreaterThan(0);
    const written = logs.join('\n') + metrics;
    for (const { secret } of secrets) {
      expect(written).not.toContain(secret);
      expect(written).not.toContain(secret.slice(6, 30));
    }
    expect(Object.keys(openapi.paths)).toEqual(
      expect.arrayContaining(['/accounts/signing-secrets', '/accounts/signing-secrets/rotate']),
    );
    expect(openapi.paths['/accounts/signing-secrets/rotate']?.post.summary).toMatch(/Rotate/);
  });
});
