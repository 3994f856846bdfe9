// @module-tag postgres
// @module-tag pglite
import { connect } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type Database, loadConfig, type Resolver } from '../src/index.js';
import { customer, ngnBeneficiary, sessionRequest } from './fixtures/requests.js';
import { openTestDatabase, testStorages } from './fixtures/storage.js';

/**
 * The sender input battery: every route the service serves (read from the app itself, so a new
 * route is covered without touching this file) against a matrix of malformed input: bad JSON,
 * wrong types in every field, deep nesting, oversize bodies, NUL characters, invalid UTF-8, forged
 * cursors, long ids, bad percent-encoding, wrong content types and headers. Whatever the answer,
 * it is never 500 or more, and every error has the documented `{"error": {"code", "message"}}`
 * (the dashboard's pages: an HTML error page with its status).
 */

const KEY = 'sk_test_battery_key';
const LIVE_KEY = 'sk_live_battery_key';
const resolve: Resolver = async (host) => {
  if (host === 'merchant.example') return ['93.184.216.34'];
  throw new Error(`ENOTFOUND ${host}`);
};

interface Route {
  method: string;
  /** Fastify's spelling: `/payments/:id`, `/docs/*`. */
  path: string;
}

/** Every route of the app and its methods (HEAD left out: it answers as GET does), from Fastify's own table. */
function routesOf(app: FastifyInstance): Route[] {
  const routes: Route[] = [];
  const stack: string[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const match = /^((?:│ {3}| {4})*)[├└]── (.*?)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (!match) continue;
    const level = (match[1] as string).length / 4;
    stack.length = level;
    stack.push(match[2] as string);
    for (const method of (match[3] ?? '').split(', ').filter(Boolean)) {
      if (method !== 'HEAD') routes.push({ method, path: stack.join('') });
    }
  }
  return routes;
}

/** A body that is valid for a route, where one is known; other routes start from `{}`. */
const VALID_BODIES: Record<string, unknown> = {
  'POST /payment-sessions': sessionRequest,
  'POST /payment-sessions/:payment_id': {
    card: { number: '4242424242424242', expiry_month: 12, expiry_year: 2030, cvv: '123' },
  },
  'POST /customers': customer,
  'POST /beneficiaries': ngnBeneficiary,
  'PATCH /accounts/settings': { require_mfa: false, webhook_urls: ['https://merchant.example/hook'] },
  'POST /sandbox/payment-sessions/:payment_id/complete': { outcome: 'succeeded' },
  'POST /events/redeliver': { since: '2020-01-01T00:00:00Z' },
  'POST /webhook-endpoints': {
    url: 'https://merchant.example/hooks',
    enabled_events: ['*'],
    signature_scheme: 'v1',
  },
  'PATCH /webhook-endpoints/:id': { status: 'enabled', enabled_events: ['payment.session.created'] },
  // Recovering the last hour (at most 14 days back): the window the route takes.
  'POST /webhook-endpoints/:id/recover': { since: new Date(Date.now() - 3_600_000).toISOString() },
};

const RAW = '"\u0001raw\u0001"';
/** Values of every wrong kind, put in place of each field; `raw:` ones are JSON tokens written as they are. */
const WRONG_VALUES: unknown[] = [
  null,
  true,
  0,
  -1,
  1.5,
  'raw:1e400',
  'raw:-1e400',
  'raw:9007199254740993',
  'raw:1e308',
  'raw:100000.00000000000001',
  '',
  'x',
  'x'.repeat(70_000),
  '\u0000',
  '\ud800',
  'a\r\nBcc: x@example.com',
  '<script>alert(1)</script>',
  '😀é',
  [],
  {},
  [1, 'a', null],
  { nested: { deeper: [] } },
];

/** Every path of `value` down to `depth` levels: ['amount'], ['customer', 'email'], ... */
function fieldPaths(value: unknown, depth = 2, prefix: string[] = []): string[][] {
  if (value === null || typeof value !== 'object' || Array.isArray(value) || depth === 0) return [];
  return Object.entries(value).flatMap(([key, item]) => [
    [...prefix, key],
    ...fieldPaths(item, depth - 1, [...prefix, key]),
  ]);
}

/** The JSON text of `body` with the field at `path` replaced by `replacement` (or removed). */
function mutate(body: unknown, path: string[], replacement: unknown | typeof REMOVE): string {
  const copy = structuredClone(body) as Record<string, unknown>;
  let target = copy;
  for (const key of path.slice(0, -1)) target = target[key] as Record<string, unknown>;
  const last = path[path.length - 1] as string;
  const raw =
    typeof replacement === 'string' && replacement.startsWith('raw:') ? replacement.slice(4) : undefined;
  if (replacement === REMOVE) delete target[last];
  else target[last] = raw === undefined ? replacement : '\u0001raw\u0001';
  const text = JSON.stringify(copy);
  return raw === undefined ? text : text.replace(RAW, raw);
}
const REMOVE = Symbol('remove');

const nest = (levels: number, inner = '0') => `${'['.repeat(levels)}${inner}${']'.repeat(levels)}`;
const nestObjects = (levels: number) => `${'{"a":'.repeat(levels)}0${'}'.repeat(levels)}`;
const cursor = (text: string) => Buffer.from(text, 'latin1').toString('base64url');
const ZERO_UUID = '00000000-0000-0000-0000-000000000000';

/** Bodies that are wrong whatever the route: not JSON, not an object, too deep, too big, NUL, bad UTF-8. */
const BAD_BODIES: [string, string | Buffer][] = [
  ['truncated JSON', '{"a":'],
  ['single quotes', "{'a':1}"],
  ['trailing text', '{} x'],
  ['a bare word', 'nul'],
  ['an array', '[]'],
  ['a string', '"s"'],
  ['a number', '1'],
  ['null', 'null'],
  ['true', 'true'],
  ['4,000 nested arrays', nest(4000)],
  ['4,000 nested objects', nestObjects(4000)],
  ['100,000 nested arrays', nest(100_000)],
  ['65 nested arrays in a field', `{"metadata":${nest(64)}}`],
  ['4,000 nested arrays in a field', `{"metadata":${nest(4000)},"outcome":"failed"}`],
  ['a 2 MiB body', `{"pad":"${'x'.repeat(2 * 1024 * 1024)}"}`],
  ['a body just over 1 MiB', `{"pad":"${'x'.repeat(1024 * 1024)}"}`],
  ['an escaped NUL in a value', '{"a":"\\u0000"}'],
  ['an escaped NUL in a key', '{"\\u0000":1}'],
  ['a raw NUL byte', '{"a":"\u0000"}'],
  ['a NUL byte outside strings', '{"a":1}\u0000'],
  ['invalid UTF-8 in a string', Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])],
  ['an overlong UTF-8 encoding', Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xc0, 0xaf, 0x22, 0x7d])],
  ['UTF-16', Buffer.from('{"a":1}', 'utf16le')],
  ['a lone surrogate escape', '{"description":"\\ud800","outcome":"\\udfff"}'],
  ['a prototype key', '{"__proto__":{"admin":true}}'],
  ['a constructor key', '{"constructor":{"prototype":{"admin":true}}}'],
  ['duplicate keys', '{"outcome":"failed","outcome":"succeeded"}'],
  ['1e400', '{"amount":1e400}'],
  ['-0', '{"amount":-0}'],
  ['an exponent too large to read', '{"amount":1e999999999999999999999}'],
  ['a very long number', `{"amount":1${'0'.repeat(100_000)}}`],
  ['a very long fraction', `{"amount":0.${'0'.repeat(100_000)}1}`],
  ['whitespace only', '   \n  '],
  ['a BOM', '\ufeff{}'],
];

const CONTENT_TYPES = [
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/xml',
  'application/jsonx',
  'application/json; charset=utf-16',
  'application/json; charset=latin1',
  'application/*',
  '*/*',
  ';',
  '',
  'application/json;;;',
  'APPLICATION/JSON',
  'application/json, text/plain',
];

/** Query strings that are wrong whatever the route, forged cursors first. */
const BAD_QUERIES = [
  `after=${cursor(`99999999999999999999.${ZERO_UUID}`)}`,
  `before=${cursor(`99999999999999999999.${ZERO_UUID}`)}`,
  `after=${cursor(`253402300800000000.${ZERO_UUID}`)}`,
  `after=${cursor(`9223372036854775807.${ZERO_UUID}`)}`,
  `after=${cursor('1.zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz')}`,
  `after=${cursor('1.------------------------------------')}`,
  `after=${cursor('1.0000000000000000000000000000000000000')}`,
  `after=${cursor(`-1.${ZERO_UUID}`)}`,
  `after=${cursor(`1.5.${ZERO_UUID}`)}`,
  `after=${cursor(`1.${ZERO_UUID.toUpperCase()}`)}`,
  `after=${cursor(`01.${ZERO_UUID}`)}`,
  `after=${cursor(`1.${ZERO_UUID}\u0000`)}`,
  `after=${cursor(`1.${ZERO_UUID}`)}=`,
  `after=${cursor(`1.${ZERO_UUID}`)}%20`,
  'after=!!!!',
  'after=%ZZ',
  'after=%00',
  `after=${'A'.repeat(5000)}`,
  `after=${cursor(`1.${ZERO_UUID}`)}&before=${cursor(`1.${ZERO_UUID}`)}`,
  'after=x&after=y',
  'limit=0',
  'limit=101',
  'limit=-1',
  'limit=1e2',
  'limit=abc',
  'limit=99999999999999999999',
  'limit[]=1',
  'status=bogus',
  'delivery_status=bogus',
  `payment_id=${'a'.repeat(500)}`,
  'payment_id=%E0%A4%A',
  `type=${'t'.repeat(5000)}`,
  'type=%ED%A0%80',
  'type=%FF',
  'type=%F0%9F%98%80',
  `since=0000-01-01T00:00:00Z`,
];

/** Path parameter values: unknown, malformed, too long, badly encoded. */
const BAD_IDS = [
  ZERO_UUID,
  ZERO_UUID.toUpperCase(),
  'not-a-uuid',
  'a'.repeat(100),
  'a'.repeat(101),
  'a'.repeat(10_000),
  '%E0%A4%A',
  '%ZZ',
  '%C0%AF',
  '%00',
  '%F0%9F%98%80',
  '%ED%A0%80',
  '%FF',
  '..%2F..%2Fetc%2Fpasswd',
  '%20',
  `${ZERO_UUID}.png`,
  'x.png',
];

interface Sent {
  what: string;
  method: string;
  url: string;
  headers?: Record<string, string>;
  payload?: string | Buffer;
}

/**
 * What is wrong with a response, or undefined: a status of 500 or more, or an error not in the
 * documented shape. The dashboard's pages (`page`) answer a browser: their errors are HTML pages.
 */
function problemOf(
  status: number,
  contentType: string | undefined,
  body: string,
  page = false,
): string | undefined {
  if (status >= 500) return `status ${status}: ${body.slice(0, 300)}`;
  if (status < 400) return undefined;
  if (page && /^text\/html/.test(contentType ?? '')) {
    // A page that says what went wrong, to a screen reader too.
    return body.startsWith('<!doctype html>') && body.includes('role="alert"')
      ? undefined
      : `error page without its message: ${body.slice(0, 200)}`;
  }
  if (!/^application\/json/.test(contentType ?? '')) return `error with content type ${contentType}`;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return `error body is not JSON: ${body.slice(0, 200)}`;
  }
  const top = parsed as { error?: { code?: unknown; message?: unknown; details?: unknown } };
  const keys = Object.keys(parsed as object);
  const error = top.error;
  const detailsOk =
    error?.details === undefined ||
    (Array.isArray(error.details) &&
      error.details.every(
        (d: { field?: unknown; message?: unknown }) =>
          typeof d.field === 'string' && typeof d.message === 'string',
      ));
  const errorKeys = error && typeof error === 'object' ? Object.keys(error) : [];
  if (
    keys.length !== 1 ||
    keys[0] !== 'error' ||
    typeof error?.code !== 'string' ||
    !/^[a-z][a-z_]*$/.test(error.code) ||
    typeof error.message !== 'string' ||
    error.message.length === 0 ||
    !detailsOk ||
    errorKeys.some((k) => !['code', 'message', 'details'].includes(k))
  ) {
    return `error body not in the documented shape: ${body.slice(0, 300)}`;
  }
  return undefined;
}

describe.each(testStorages())('sender input battery on %s', { timeout: 600_000 }, (storage) => {
  let app: FastifyInstance;
  let database: Database;
  let cleanup: () => Promise<void>;
  let routes: Route[];
  /** Real ids, so that routes are driven past their lookups too. */
  const real: { session?: string; captured?: string; event?: string; endpoint?: string } = {};

  beforeAll(async () => {
    ({ database, cleanup } = await openTestDatabase(storage, 'battery'));
    app = await buildApp({
      database,
      config: loadConfig({ PAYHOOK_API_KEYS: `${KEY}:biz-battery:test,${LIVE_KEY}:biz-battery:live` }),
      resolve,
      logger: false,
    });
    await app.ready();
    routes = routesOf(app);
    const auth = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
    const create = async () =>
      (
        await app.inject({
          method: 'POST',
          url: '/payment-sessions',
          headers: auth,
          payload: JSON.stringify(sessionRequest),
        })
      ).json() as { data: { payment: { id: string } } };
    real.session = (await create()).data.payment.id;
    real.captured = (await create()).data.payment.id;
    await app.inject({
      method: 'POST',
      url: `/payment-sessions/${real.captured}`,
      headers: auth,
      payload: '{}',
    });
    const events = (await app.inject({ method: 'GET', url: '/events', headers: auth })).json() as {
      data: { id: string }[];
    };
    real.event = events.data[0]?.id;
    const endpoint = (
      await app.inject({
        method: 'POST',
        url: '/webhook-endpoints',
        headers: auth,
        payload: JSON.stringify({ url: 'https://merchant.example/battery' }),
      })
    ).json() as { data: { id: string } };
    real.endpoint = endpoint.data.id;
  }, 120_000);

  afterAll(async () => {
    await app?.close();
    await cleanup?.();
  });

  it('reads every route from the app, the documented ones included', () => {
    const spec = app.swagger() as { paths: Record<string, Record<string, unknown>> };
    const served = new Set(routes.map((r) => `${r.method} ${r.path}`));
    for (const [path, methods] of Object.entries(spec.paths)) {
      for (const method of Object.keys(methods)) {
        expect(served, `${method} ${path}`).toContain(
          `${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`,
        );
      }
    }
    expect(routes.length).toBeGreaterThanOrEqual(Object.keys(spec.paths).length);
  });

  /** The URL of `route` with its parameters filled with `id` (a wildcard too). */
  const urlOf = (route: Route, id: string, query = '') => {
    const path = route.path
      .replace(/:(\w+)/g, (_m, name: string) => (name === 'file' ? `${id}.png` : id))
      .replace('*', id);
    return query ? `${path}?${query}` : path;
  };
  /** The ids to fill a route's parameters with for its ordinary calls: real ones where it has any. */
  const goodId = (route: Route) =>
    route.path.startsWith('/webhook-endpoints/:id')
      ? (real.endpoint ?? ZERO_UUID)
      : route.path.includes(':id')
        ? (real.event ?? ZERO_UUID)
        : route.path.includes('payment_id')
          ? (real.captured ?? ZERO_UUID)
          : ZERO_UUID;
  const hasBody = (route: Route) => route.method !== 'GET' && route.method !== 'DELETE';

  /** Every request of the matrix for one route. */
  function matrix(route: Route): Sent[] {
    const name = `${route.method} ${route.path}`;
    const auth = { authorization: `Bearer ${KEY}` };
    const json = { ...auth, 'content-type': 'application/json' };
    const valid = VALID_BODIES[name] ?? {};
    const validText = JSON.stringify(valid);
    const sent: Sent[] = [];
    const send = (what: string, url: string, headers: Record<string, string>, payload?: string | Buffer) =>
      sent.push({
        what,
        method: route.method,
        url,
        headers,
        ...(payload === undefined ? {} : { payload }),
      });
    const base = urlOf(route, goodId(route));
    const body = hasBody(route) ? validText : undefined;
    const bodyHeaders = hasBody(route) ? json : auth;

    // Identity: none, malformed, another mode.
    send('no key', base, hasBody(route) ? { 'content-type': 'application/json' } : {}, body);
    send('a malformed Authorization header', base, { ...bodyHeaders, authorization: 'Bearer' }, body);
    send('a live key', base, { ...bodyHeaders, authorization: `Bearer ${LIVE_KEY}` }, body);
    // Ids: unknown, malformed, over 100 characters, badly percent-encoded.
    if (/[:*]/.test(route.path)) {
      for (const id of [
        ...BAD_IDS,
        real.session ?? ZERO_UUID,
        real.captured ?? ZERO_UUID,
        real.event ?? ZERO_UUID,
        real.endpoint ?? ZERO_UUID,
      ]) {
        send(`id ${id.slice(0, 40)}`, urlOf(route, id), bodyHeaders, body);
      }
    }
    // Query strings: forged cursors, bad limits and filters.
    for (const query of BAD_QUERIES)
      send(`query ${query.slice(0, 60)}`, `${base}?${query}`, bodyHeaders, body);
    if (!hasBody(route)) return sent;
    // Bodies wrong whatever the route.
    for (const [what, payload] of BAD_BODIES) send(what, base, json, payload);
    // Every field of a valid body, of every wrong kind, and missing.
    for (const path of fieldPaths(valid)) {
      for (const value of [...WRONG_VALUES, REMOVE]) {
        const label = value === REMOVE ? 'removed' : JSON.stringify(value)?.slice(0, 30);
        send(`${path.join('.')} = ${label}`, base, json, mutate(valid, path, value));
      }
      send(`${path.join('.')} nested 64 deep`, base, json, mutate(valid, path, `raw:${nest(63)}`));
      send(`${path.join('.')} nested 4,000 deep`, base, json, mutate(valid, path, `raw:${nest(4000)}`));
    }
    // Content types that are not JSON, or not quite.
    for (const type of CONTENT_TYPES)
      send(`content type ${JSON.stringify(type)}`, base, { ...auth, 'content-type': type }, validText);
    send('a body without a content type', base, auth, validText);
    // Headers: Idempotency-Key malformed, too long; a content length that lies.
    send('a long Idempotency-Key', base, { ...json, 'idempotency-key': 'k'.repeat(300) }, validText);
    send('an Idempotency-Key with spaces', base, { ...json, 'idempotency-key': 'a b' }, validText);
    send(
      'an Idempotency-Key reused with a deep body',
      base,
      { ...json, 'idempotency-key': 'battery-deep' },
      nest(4000),
    );
    return sent;
  }

  it('answers every malformed request to every route below 500, every error in the documented shape', async () => {
    const problems: string[] = [];
    let count = 0;
    // The unknown routes the router meets before any of ours.
    const stray: Sent[] = [
      { what: 'a bad percent-encoding at the root', method: 'GET', url: '/%ZZ' },
      { what: 'an unknown route', method: 'GET', url: '/nowhere' },
      { what: 'an unknown method', method: 'PUT', url: '/payments' },
      { what: 'a path of 10,000 characters', method: 'GET', url: `/${'p'.repeat(10_000)}` },
      { what: 'a NUL in the path', method: 'GET', url: '/payments%00' },
    ];
    for (const route of routes) {
      for (const request of [...matrix(route), ...stray]) {
        const res = await app.inject({
          method: request.method as 'GET',
          url: request.url,
          ...(request.headers ? { headers: request.headers } : {}),
          ...(request.payload === undefined ? {} : { payload: request.payload }),
        });
        count++;
        const problem = problemOf(
          res.statusCode,
          res.headers['content-type'] as string | undefined,
          res.body,
          request.url.startsWith('/dashboard'),
        );
        if (problem)
          problems.push(`${request.method} ${request.url.slice(0, 80)} (${request.what}): ${problem}`);
      }
    }
    expect(count).toBeGreaterThan(1000);
    expect(problems).toEqual([]);
  });

  it('answers the documented status and code to each kind of malformed input', async () => {
    const auth = { authorization: `Bearer ${KEY}` };
    const json = { ...auth, 'content-type': 'application/json' };
    const cases: [string, Sent, number, string][] = [
      [
        'a cursor past year 9999',
        { what: '', method: 'GET', url: `/payments?after=${cursor(`99999999999999999999.${ZERO_UUID}`)}` },
        400,
        'invalid_cursor',
      ],
      [
        'a cursor with a malformed UUID',
        {
          what: '',
          method: 'GET',
          url: `/customers?before=${cursor('1.zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz')}`,
        },
        400,
        'invalid_cursor',
      ],
      [
        'a cursor that is not base64url',
        { what: '', method: 'GET', url: '/events?after=!!!!' },
        400,
        'invalid_cursor',
      ],
      [
        'an id over 100 characters',
        { what: '', method: 'GET', url: `/payments/${'a'.repeat(101)}` },
        404,
        'not_found',
      ],
      [
        'bad percent-encoding in an id',
        { what: '', method: 'GET', url: '/payments/%E0%A4%A' },
        400,
        'invalid_request',
      ],
      [
        'a body 4,000 levels deep',
        { what: '', method: 'POST', url: '/customers', payload: nest(4000) },
        400,
        'invalid_request',
      ],
      [
        'a body 65 levels deep',
        { what: '', method: 'POST', url: '/payment-sessions', payload: `{"metadata":${nest(64)}}` },
        400,
        'invalid_request',
      ],
      [
        'a body 4,000 levels deep with an Idempotency-Key',
        {
          what: '',
          method: 'POST',
          url: '/payment-sessions',
          payload: nestObjects(4000),
          headers: { 'idempotency-key': 'deep' },
        },
        400,
        'invalid_request',
      ],
      [
        'invalid UTF-8',
        {
          what: '',
          method: 'POST',
          url: '/customers',
          payload: Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]),
        },
        400,
        'invalid_request',
      ],
      [
        'an amount of 9007199254740993',
        {
          what: '',
          method: 'POST',
          url: '/payment-sessions',
          payload: mutate(sessionRequest, ['amount'], 'raw:9007199254740993'),
        },
        422,
        'validation_failed',
      ],
      [
        'an amount of 1e308',
        {
          what: '',
          method: 'POST',
          url: '/payment-sessions',
          payload: mutate(sessionRequest, ['amount'], 'raw:1e308'),
        },
        422,
        'validation_failed',
      ],
      [
        'an amount of 2^53',
        {
          what: '',
          method: 'POST',
          url: '/payment-sessions',
          payload: mutate(sessionRequest, ['amount'], 2 ** 53),
        },
        422,
        'validation_failed',
      ],
      [
        'a redelivery with an array body',
        { what: '', method: 'POST', url: `/events/${ZERO_UUID}/redeliver`, payload: '[]' },
        400,
        'invalid_request',
      ],
      [
        'a redelivery with a string body',
        { what: '', method: 'POST', url: `/events/${ZERO_UUID}/redeliver`, payload: '"x"' },
        400,
        'invalid_request',
      ],
      [
        'an email with CR LF',
        {
          what: '',
          method: 'POST',
          url: '/customers',
          payload: JSON.stringify({ ...customer, email: 'a@example.com\r\nBcc: b@example.com' }),
        },
        422,
        'validation_failed',
      ],
    ];
    for (const [what, request, status, code] of cases) {
      const res = await app.inject({
        method: request.method as 'GET',
        url: request.url,
        headers: request.payload === undefined ? auth : { ...json, ...request.headers },
        ...(request.payload === undefined ? {} : { payload: request.payload }),
      });
      expect(res.statusCode, what).toBe(status);
      expect((res.json() as { error: { code: string } }).error.code, what).toBe(code);
    }
  });

  it('answers a request that is not valid HTTP in the documented shape too', async () => {
    const address = await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = new URL(address);
    const raw = (request: string) =>
      new Promise<string>((resolvePromise, reject) => {
        const socket = connect(Number(port), '127.0.0.1');
        let answer = '';
        socket.on('data', (chunk) => {
          answer += chunk.toString('latin1');
        });
        socket.on('end', () => resolvePromise(answer));
        socket.on('close', () => resolvePromise(answer));
        socket.on('error', reject);
        socket.write(request);
      });
    const answers = [
      [await raw('NOT HTTP AT ALL\r\n\r\n'), 400],
      [await raw(`GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(64 * 1024)}\r\n\r\n`), 431],
      [await raw('GET /payments HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n'), 400],
    ] as const;
    for (const [answer, status] of answers) {
      const [head, body = ''] = answer.split('\r\n\r\n');
      expect(head, answer.slice(0, 200)).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
      const contentType = /content-type: ([^\r\n]+)/i.exec(head ?? '')?.[1];
      expect(problemOf(status, contentType, body)).toBeUndefined();
    }
  });
});
