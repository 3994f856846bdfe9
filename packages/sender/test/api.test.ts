// @module-tag postgres
// @module-tag pglite
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  buildApp,
  createApiKey,
  type Database,
  loadConfig,
  type Resolver,
  revokeApiKey,
} from '../src/index.js';

import { openTestDatabase, testStorages } from './fixtures/storage.js';

const resolve: Resolver = async (host) => {
  const answers: Record<string, string[]> = {
    'merchant.example': ['93.184.216.34'],
    'internal.example': ['10.0.0.8'],
  };
  if (!answers[host]) throw new Error(`ENOTFOUND ${host}`);
  return answers[host];
};

interface Harness {
  url: string;
  database: Database;
  app: FastifyInstance;
}

// The whole API over real HTTP, once on PGlite and once on the PostgreSQL server.
describe.each(testStorages())('sender API on %s', { timeout: 60_000 }, (storage) => {
  let h: Harness;
  let cleanup: () => Promise<void>;
  const KEY_A = 'sk_test_config_key_business_a';
  const KEY_A_LIVE = 'sk_live_config_key_business_a';
  const KEY_B = 'sk_test_config_key_business_b';

  beforeAll(async () => {
    let database: Database;
    ({ database, cleanup } = await openTestDatabase(storage, 'api'));
    const config = loadConfig({
      PAYHOOK_API_KEYS: `${KEY_A}:biz-a:test,${KEY_A_LIVE}:biz-a:live,${KEY_B}:biz-b:test`,
    });
    const app = await buildApp({ database, config, resolve, logger: false });
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    h = { url, database, app };
  }, 60_000); // PGlite's start and migrations can take longer than the default 10 s on a busy machine

  afterAll(async () => {
    await h?.app.close();
    await cleanup?.();
  });

  const call = (
    method: string,
    path: string,
    key: string | undefined,
    body?: string,
    headers: Record<string, string> = {},
  ) =>
    fetch(`${h.url}${path}`, {
      method,
      headers: {
        ...(key ? { authorization: `Bearer ${key}` } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      body,
    });
  const json = async (res: Response) =>
    (await res.json()) as { data?: unknown; error?: { code: string; details?: { field: string }[] } };

  it('serves /healthz without a key', async () => {
    const res = await call('GET', '/healthz', undefined);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true, storage, checks: { database: 'ok' } });
  });

  it('answers 401 without a key, with a malformed header, or with an unknown key', async () => {
    for (const authorization of [undefined, 'Basic abc', 'Bearer nope']) {
      const res = await call(
        'PATCH',
        '/accounts/settings',
        undefined,
        '{}',
        authorization ? { authorization } : {},
      );
      expect(res.status).toBe(401);
      expect((await json(res)).error?.code).toBe('unauthorized');
    }
  });

  it('accepts a key stored in the database', async () => {
    const key = await createApiKey(h.database.db, { businessId: 'biz-c', mode: 'test' });
    expect(key).toMatch(/^sk_test_/);
    const res = await call('PATCH', '/accounts/settings', key, '{"require_mfa":true}');
    expect(res.status).toBe(200);
    expect((await json(res)).data).toEqual({ require_mfa: true, webhook_urls: [] });
  });

  it('revokes a stored key, whole or by an unambiguous prefix; the sender refuses it at once', async () => {
    const first = await createApiKey(h.database.db, { businessId: 'biz-revoke', mode: 'test' });
    const second = await createApiKey(h.database.db, { businessId: 'biz-revoke', mode: 'test' });
    expect((await call('GET', '/customers/', first)).status).toBe(200);
    const whole = await revokeApiKey(h.database.db, first);
    expect(whole.revoked).toMatchObject({
      prefix: first.slice(0, 12),
      businessId: 'biz-revoke',
      mode: 'test',
    });
    expect((await call('GET', '/customers/', first)).status).toBe(401);
    expect((await call('GET', '/customers/', second)).status).toBe(200);
    // A prefix that several keys share revokes none, and names them.
    const third = await createApiKey(h.database.db, { businessId: 'biz-revoke', mode: 'test' });
    const shared = await revokeApiKey(h.database.db, 'sk_test_');
    expect(shared.revoked).toBeUndefined();
    expect(shared.matches.map((m) => m.prefix)).toEqual(
      expect.arrayContaining([second.slice(0, 12), third.slice(0, 12)]),
    );
    expect((await call('GET', '/customers/', third)).status).toBe(200);
    // LIKE's wildcards in a prefix are matched as themselves.
    expect((await revokeApiKey(h.database.db, 'sk%')).matches).toEqual([]);
    const byPrefix = await revokeApiKey(h.database.db, second.slice(0, 12));
    expect(byPrefix.revoked?.prefix).toBe(second.slice(0, 12));
    expect((await call('GET', '/customers/', second)).status).toBe(401);
    await expect(revokeApiKey(h.database.db, `${second.slice(0, 13)}`)).rejects.toThrow(
      /at most 12 characters/,
    );
  });

  it('registers public webhook URLs and keeps each business and mode apart', async () => {
    const res = await call(
      'PATCH',
      '/accounts/settings',
      KEY_A,
      JSON.stringify({ webhook_urls: ['https://merchant.example/webhooks/'], extra: 1 }),
    );
    expect(res.status).toBe(200);
    expect((await json(res)).data).toEqual({
      require_mfa: false,
      webhook_urls: ['https://merchant.example/webhooks/'],
    });
    // Another business, and the same business in live mode, see their own settings.
    expect((await json(await call('PATCH', '/accounts/settings', KEY_B, '{}'))).data).toEqual({
      require_mfa: false,
      webhook_urls: [],
    });
    expect((await json(await call('PATCH', '/accounts/settings', KEY_A_LIVE, '{}'))).data).toEqual({
      require_mfa: false,
      webhook_urls: [],
    });
    // A partial update keeps the rest.
    expect(
      (await json(await call('PATCH', '/accounts/settings', KEY_A, '{"require_mfa":true}'))).data,
    ).toEqual({
      require_mfa: true,
      webhook_urls: ['https://merchant.example/webhooks/'],
    });
  });

  it('refuses non-public webhook URLs with 422 and the field of each', async () => {
    const res = await call(
      'PATCH',
      '/accounts/settings',
      KEY_A,
      JSON.stringify({
        webhook_urls: [
          'https://merchant.example/',
          'http://127.0.0.1/',
          'http://internal.example/x',
          'http://2130706433/',
          'ftp://merchant.example/',
        ],
      }),
    );
    expect(res.status).toBe(422);
    const body = await json(res);
    expect(body.error?.code).toBe('validation_failed');
    expect(body.error?.details?.map((d) => d.field)).toEqual([
      'webhook_urls.1',
      'webhook_urls.2',
      'webhook_urls.3',
      'webhook_urls.4',
    ]);
    // The refusal of a loopback URL says how to allow one on a developer's machine.
    const loopback = body.error?.details?.[0] as { field: string; message: string } | undefined;
    expect(loopback?.message).toContain('127.0.0.1: loopback');
    expect(loopback?.message).toContain('payhook serve --allow-private-webhooks');
    expect(loopback?.message).toContain('PAYHOOK_ALLOW_PRIVATE_WEBHOOKS=1');
  });

  it('accepts a host that does not resolve today (it is checked again at every delivery)', async () => {
    const res = await call(
      'PATCH',
      '/accounts/settings',
      KEY_B,
      '{"webhook_urls":["https://not-yet.example/hooks"]}',
    );
    expect(res.status).toBe(200);
  });

  it.each([
    ['malformed JSON', '{"require_mfa":', 400, 'invalid_request'],
    ['a JSON array', '[]', 400, 'invalid_request'],
    ['a string where a boolean belongs', '{"require_mfa":"true"}', 422, 'validation_failed'],
    ['a number in webhook_urls', '{"webhook_urls":[1]}', 422, 'validation_failed'],
  ])('answers %s with %i %s, never 500', async (_name, body, status, code) => {
    const res = await call('PATCH', '/accounts/settings', KEY_A, body);
    expect(res.status).toBe(status);
    expect((await json(res)).error?.code).toBe(code);
  });

  it('answers a huge body with 413, a non-JSON type with 415, an unknown route with 404, all in the error shape', async () => {
    const big = await call('PATCH', '/accounts/settings', KEY_A, `{"pad":"${'x'.repeat(2 * 1024 * 1024)}"}`);
    expect(big.status).toBe(413);
    expect((await json(big)).error?.code).toBe('payload_too_large');
    const text = await call('PATCH', '/accounts/settings', KEY_A, 'require_mfa=true', {
      'content-type': 'text/plain',
    });
    expect(text.status).toBe(415);
    expect((await json(text)).error?.code).toBe('unsupported_media_type');
    const missing = await call('GET', '/nowhere', KEY_A);
    expect(missing.status).toBe(404);
    expect((await json(missing)).error?.code).toBe('not_found');
  });

  it('answers 400 invalid_request to a NUL character in a body, a key, a query or a path (no stored text can hold one)', async () => {
    const customer = (first: string) =>
      JSON.stringify({
        first_name: first,
        last_name: 'Obi',
        email: 'ada@example.com',
        phone_number: '+2348012345678',
        billing_address: {
          line1: '1',
          line2: '',
          city: 'Lagos',
          state: 'Lagos',
          zip_code: '1',
          country: 'NG',
        },
      });
    const refused = [
      await call('POST', '/customers', KEY_A, customer('A\u0000da')),
      await call('PATCH', '/accounts/settings', KEY_A, '{"require_mfa":false,"x\\u0000":1}'),
      await call('GET', '/events?type=payment%00', KEY_A),
      await call('GET', '/events/%00', KEY_A),
    ];
    for (const res of refused) {
      expect(res.status).toBe(400);
      expect((await json(res)).error?.code).toBe('invalid_request');
    }
    // A backslash followed by "u0000" as text is no NUL: it is stored as sent.
    const literal = await call('POST', '/customers', KEY_A, customer('A\\u0000da'));
    expect(literal.status).toBe(201);
    expect(((await literal.json()) as { data: { first_name: string } }).data.first_name).toBe('A\\u0000da');
  });
});

describe('loadConfig', () => {
  it('reads the documented variables with their defaults', () => {
    expect(loadConfig({})).toMatchObject({
      port: 8080,
      host: '127.0.0.1',
      dataDir: './.payhook',
      apiKeys: [],
      allowPrivateWebhooks: false,
      databasePoolSize: 10,
    });
    expect(loadConfig({ PAYHOOK_DB_POOL_SIZE: '24' }).databasePoolSize).toBe(24);
    expect(
      loadConfig({
        PORT: '9000',
        PAYHOOK_API_KEYS: 'k1:b1:test, k2:b2:live',
        PAYHOOK_ALLOW_PRIVATE_WEBHOOKS: '1',
      }),
    ).toMatchObject({
      port: 9000,
      apiKeys: [
        { key: 'k1', businessId: 'b1', mode: 'test' },
        { key: 'k2', businessId: 'b2', mode: 'live' },
      ],
      allowPrivateWebhooks: true,
    });
  });

  it.each([
    [{ PORT: 'eighty' }, /PORT/],
    [{ PAYHOOK_API_KEYS: 'k1:b1:prod' }, /PAYHOOK_API_KEYS/],
    [{ PAYHOOK_API_KEYS: 'k1:b1' }, /PAYHOOK_API_KEYS/],
    [{ PAYHOOK_ALLOW_PRIVATE_WEBHOOKS: 'yes' }, /PAYHOOK_ALLOW_PRIVATE_WEBHOOKS/],
    [{ PAYHOOK_DB_POOL_SIZE: '0' }, /PAYHOOK_DB_POOL_SIZE/],
    [{ PAYHOOK_DB_POOL_SIZE: 'many' }, /PAYHOOK_DB_POOL_SIZE/],
  ])('refuses %j naming the variable, without echoing the key', (env, message) => {
    expect(() => loadConfig(env)).toThrow(message);
    try {
      loadConfig(env);
    } catch (error) {
      expect((error as Error).message).not.toContain('k1');
    }
  });
});

describe('OpenAPI', { timeout: 60_000 }, () => {
  it('serves an OpenAPI 3.1 document built from the route schemas, and renders it at /docs, without a key', async () => {
    const { database, cleanup } = await openTestDatabase('pglite', 'openapi');
    const app = await buildApp({ database, config: loadConfig({}), logger: false });
    try {
      const spec = (await app.inject({ method: 'GET', url: '/openapi.json' })).json() as {
        openapi: string;
        paths: Record<string, Record<string, { requestBody?: unknown }>>;
      };
      expect(spec.openapi).toBe('3.1.0');
      for (const path of [
        '/payment-sessions',
        '/payment-sessions/{payment_id}',
        '/payments',
        '/payments/{id}',
        '/customers',
        '/beneficiaries',
        '/accounts/settings',
      ]) {
        expect(Object.keys(spec.paths), path).toContain(path);
      }
      // The customer shape is core's schema, not a copy.
      expect(JSON.stringify(spec.paths['/customers']?.post?.requestBody)).toContain('billing_address');
      const docs = await app.inject({ method: 'GET', url: '/docs' });
      const page =
        docs.statusCode === 302
          ? await app.inject({ method: 'GET', url: docs.headers.location as string })
          : docs;
      expect(page.statusCode).toBe(200);
      expect(page.body).toContain('swagger');
    } finally {
      await app.close();
      await cleanup();
    }
  });
});

// The health check against a database that is gone: a sender whose storage closed under it.
describe.each(testStorages())('/healthz on %s', { timeout: 60_000 }, (storage) => {
  it('answers 503 naming the database when it cannot answer a query', async () => {
    const { database, cleanup } = await openTestDatabase(storage, 'health');
    const app = await buildApp({ database, config: loadConfig({}), logger: false });
    try {
      expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
      await cleanup();
      const res = await app.inject({ method: 'GET', url: '/healthz' });
      expect(res.statusCode).toBe(503);
      expect(res.json()).toEqual({
        ok: false,
        storage,
        checks: { database: expect.stringMatching(/^failed: .+/) },
      });
    } finally {
      await app.close();
    }
  });
});
