import { afterAll, afterEach, describe, expect, it } from 'vitest';
import {
  type LoopbackReceiver,
  type LoopbackReceiverOptions,
  startLoopbackReceiver,
} from '../../../test/support/loopback-receiver.js';
import { createDeliveryClient, type DeliveryClient } from '../src/delivery/http-client.js';
import type { Resolver } from '../src/net/webhook-url.js';

// Every server here listens on 127.0.0.1, so the client runs with allowPrivate: the SSRF guard has
// its own suite (ssrf.test.ts); this one is about HTTP behaviour.

const servers: LoopbackReceiver[] = [];

/** A loopback receiver that records each request (with its raw body), closed after the file. */
async function startServer(options: LoopbackReceiverOptions): Promise<LoopbackReceiver> {
  const server = await startLoopbackReceiver(options);
  servers.push(server);
  return server;
}

const answer = (
  status: number,
  body = '',
  headers: Record<string, string> = {},
): LoopbackReceiverOptions => ({
  respond: { status, body, headers },
});

const clients: DeliveryClient[] = [];
const clientWith = (options: Parameters<typeof createDeliveryClient>[0] = {}) => {
  const client = createDeliveryClient({ allowPrivate: true, ...options });
  clients.push(client);
  return client;
};

afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close()));
});

afterAll(async () => {
  await Promise.all(servers.map((server) => server.close()));
});

const body = JSON.stringify({ event: 'payment.session.succeeded', data: { amount: 150000 }, checksum: 'ab' });

describe('createDeliveryClient: responses', () => {
  it('counts HTTP 200 as delivered and keeps the response body', async () => {
    const target = await startServer(answer(200, '{"received":true}'));
    const outcome = await clientWith().send({ url: target.url, body });
    expect(outcome).toMatchObject({
      ok: true,
      statusCode: 200,
      responseBody: '{"received":true}',
      error: null,
    });
    expect(outcome.latencyMs).toBeGreaterThanOrEqual(0);
    expect(outcome.latencyMs).toBeLessThan(5000);
  });

  it.each([201, 202, 204, 400, 404, 500, 503])('treats %i as unexpected_status', async (status) => {
    const target = await startServer(answer(status, status === 204 ? '' : `status ${status}`));
    const outcome = await clientWith().send({ url: target.url, body });
    expect(outcome).toMatchObject({ ok: false, statusCode: status, error: { code: 'unexpected_status' } });
    expect(outcome.error?.message).toContain(String(status));
    expect(outcome.responseBody).toBe(status === 204 ? null : `status ${status}`);
  });

  it.each([301, 302, 303, 307, 308])('reports %i as redirect and does not follow it', async (status) => {
    const elsewhere = await startServer(answer(200, 'followed'));
    const target = await startServer(answer(status, 'moved', { location: elsewhere.url }));
    const outcome = await clientWith().send({ url: target.url, body });
    expect(outcome).toMatchObject({
      ok: false,
      statusCode: status,
      responseBody: 'moved',
      error: { code: 'redirect' },
    });
    expect(outcome.error?.message).toContain(elsewhere.url);
    expect(target.received).toHaveLength(1);
    expect(elsewhere.received).toHaveLength(0);
    expect(elsewhere.connections).toBe(0);
  });
});

describe("createDeliveryClient: a receiver's Retry-After", () => {
  it.each([
    [503, '120', { seconds: 120 }],
    [429, 'Wed, 21 Oct 2026 07:28:00 GMT', { date: new Date('2026-10-21T07:28:00.000Z') }],
    [503, 'in a while', null],
    [503, '-5', null],
    // Only 429 and 503 say when to come back.
    [500, '120', null],
    [301, '120', null],
  ])('on %i, keeps %j as %o', async (status, header, expected) => {
    const target = await startServer(answer(status, '', { 'retry-after': header, location: '/x' }));
    const outcome = await clientWith().send({ url: target.url, body });
    expect(outcome).toMatchObject({ ok: false, statusCode: status, retryAfter: expected });
    if (expected) expect(outcome.error?.message).toContain('Retry-After: ');
    else expect(outcome.error?.message).not.toContain('Retry-After');
  });

  it('keeps none from a 200', async () => {
    const target = await startServer(answer(200, '', { 'retry-after': '120' }));
    expect(await clientWith().send({ url: target.url, body })).toMatchObject({ ok: true, retryAfter: null });
  });
});

describe('createDeliveryClient: the request', () => {
  it('POSTs the body byte-exact as application/json with the extra headers', async () => {
    const target = await startServer(answer(200));
    // Non-ASCII, an astral character and a number form a re-serialization would change.
    const exact = '{"name":"Zoë 😀 €","amount":1.0,"note":"a\\/b"}';
    const outcome = await clientWith({ userAgent: 'payhook-test/1' }).send({
      url: `${target.url}?q=1`,
      body: exact,
      headers: { 'X-Payhook-Attempt': '3', 'Content-Type': 'text/plain' },
    });
    expect(outcome.ok).toBe(true);
    expect(outcome.responseBody).toBeNull();
    const [received] = target.received;
    expect(received?.method).toBe('POST');
    expect(received?.url).toBe('/webhooks/?q=1');
    expect(received?.raw.equals(Buffer.from(exact, 'utf8'))).toBe(true);
    expect(received?.headers['content-type']).toBe('application/json');
    expect(received?.headers['content-length']).toBe(String(Buffer.byteLength(exact)));
    expect(received?.headers['x-payhook-attempt']).toBe('3');
    expect(received?.headers['user-agent']).toBe('payhook-test/1');
  });

  it('reuses one keep-alive connection for consecutive sends', async () => {
    const target = await startServer(answer(200, 'ok'));
    const client = clientWith();
    expect((await client.send({ url: target.url, body })).ok).toBe(true);
    expect((await client.send({ url: target.url, body })).ok).toBe(true);
    expect(target.received).toHaveLength(2);
    expect(target.connections).toBe(1);
  });

  it('sends through the injected resolver and the connect-time lookup', async () => {
    const target = await startServer(answer(200));
    const calls: string[] = [];
    const resolve: Resolver = async (name) => {
      calls.push(name);
      return ['127.0.0.1'];
    };
    const outcome = await clientWith({ resolve }).send({
      url: `http://merchant.test:${target.port}/hooks`,
      body,
    });
    expect(outcome.ok).toBe(true);
    expect(target.received[0]?.headers.host).toBe(`merchant.test:${target.port}`);
    // Once for the attempt's URL check, once when the socket looked the name up.
    expect(calls).toEqual(['merchant.test', 'merchant.test']);
  });
});

describe('createDeliveryClient: response bodies', () => {
  it('keeps the first 4 KiB of a 1 MiB body', async () => {
    const target = await startServer(answer(200, 'x'.repeat(1024 * 1024)));
    const outcome = await clientWith().send({ url: target.url, body });
    expect(outcome.ok).toBe(true);
    expect(outcome.responseBody).toBe('x'.repeat(4096));
  });

  it('stops reading an endless body', async () => {
    let stopped = false;
    const target = await startServer({
      handle: (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        const chunk = 'y'.repeat(16 * 1024);
        const pump = () => {
          if (stopped || res.destroyed) return;
          res.write(chunk);
          setImmediate(pump);
        };
        res.on('close', () => {
          stopped = true;
        });
        pump();
      },
    });
    const outcome = await clientWith({ maxResponseBytes: 100 }).send({ url: target.url, body });
    expect(outcome).toMatchObject({ ok: true, statusCode: 200, responseBody: 'y'.repeat(100) });
    await expect.poll(() => stopped).toBe(true);
  });

  it('does not split a multi-byte character at the limit', async () => {
    const target = await startServer(answer(200, 'ab€€'));
    const outcome = await clientWith({ maxResponseBytes: 4 }).send({ url: target.url, body });
    expect(outcome.responseBody).toBe('ab');
  });
});

describe('createDeliveryClient: failures', () => {
  it('times out a server that never answers', async () => {
    const target = await startServer({ respond: 'hang' });
    const outcome = await clientWith({ totalTimeoutMs: 300 }).send({ url: target.url, body });
    expect(outcome).toMatchObject({
      ok: false,
      statusCode: null,
      responseBody: null,
      error: { code: 'timeout' },
    });
    expect(outcome.latencyMs).toBeGreaterThanOrEqual(290);
    expect(outcome.latencyMs).toBeLessThan(3000);
  });

  it('times out a body that trickles past the deadline, keeping the status and what arrived', async () => {
    const target = await startServer({
      handle: (_req, res) => {
        res.writeHead(200);
        res.write('partial');
      },
    });
    const outcome = await clientWith({ totalTimeoutMs: 300 }).send({ url: target.url, body });
    expect(outcome).toMatchObject({
      ok: false,
      statusCode: 200,
      responseBody: 'partial',
      error: { code: 'timeout' },
    });
  });

  it('times out a resolver that hangs', async () => {
    const outcome = await clientWith({ totalTimeoutMs: 200, resolve: () => new Promise(() => {}) }).send({
      url: 'http://slow-dns.test/',
      body,
    });
    expect(outcome).toMatchObject({ ok: false, statusCode: null, error: { code: 'timeout' } });
  });

  it('reports connect_timeout when connecting takes longer than connectTimeoutMs', async () => {
    const target = await startServer(answer(200));
    let calls = 0;
    // The URL check resolves at once; the socket's lookup (inside the connect window) never does.
    const resolve: Resolver = (): Promise<string[]> =>
      ++calls === 1 ? Promise.resolve(['127.0.0.1']) : new Promise(() => {});
    const outcome = await clientWith({ resolve, connectTimeoutMs: 100, totalTimeoutMs: 5000 }).send({
      url: `http://stuck.test:${target.port}/`,
      body,
    });
    expect(outcome).toMatchObject({ ok: false, statusCode: null, error: { code: 'connect_timeout' } });
    expect(outcome.latencyMs).toBeLessThan(2000);
    expect(target.connections).toBe(0);
  });

  it('reports connection_refused for a port nobody listens on', async () => {
    const gone = await startServer(answer(200));
    await gone.close();
    const outcome = await clientWith().send({ url: gone.url, body });
    expect(outcome).toMatchObject({
      ok: false,
      statusCode: null,
      responseBody: null,
      error: { code: 'connection_refused' },
    });
  });

  it('reports network_error when the server drops the connection', async () => {
    const target = await startServer({ handle: (req) => req.socket.destroy() });
    const outcome = await clientWith().send({ url: target.url, body });
    expect(outcome).toMatchObject({ ok: false, statusCode: null, error: { code: 'network_error' } });
  });

  it.each([
    ['not a url', 'invalid_url'],
    ['ftp://127.0.0.1/', 'unsupported_scheme'],
    ['http://user:secret@127.0.0.1/', 'credentials_in_url'],
    ['http://unknown.test/', 'unresolvable_host'],
  ])('refuses %s with %s before connecting', async (url, code) => {
    const resolve: Resolver = async (name) => {
      throw new Error(`ENOTFOUND ${name}`);
    };
    const outcome = await clientWith({ resolve }).send({ url, body });
    expect(outcome).toMatchObject({ ok: false, statusCode: null, responseBody: null, error: { code } });
  });

  it('reports unresolvable_host when the name stops resolving between the check and the connection', async () => {
    const target = await startServer(answer(200));
    let calls = 0;
    const resolve: Resolver = async (name) => {
      if (++calls === 1) return ['127.0.0.1'];
      throw new Error(`ENOTFOUND ${name}`);
    };
    const outcome = await clientWith({ resolve }).send({ url: `http://flaky.test:${target.port}/`, body });
    expect(outcome).toMatchObject({ ok: false, error: { code: 'unresolvable_host' } });
    expect(target.connections).toBe(0);
  });

  it('reports tls_error when the server does not speak TLS on an https URL', async () => {
    const plain = await startServer(answer(200));
    const outcome = await clientWith().send({ url: `https://127.0.0.1:${plain.port}/`, body });
    expect(outcome).toMatchObject({ ok: false, statusCode: null, error: { code: 'tls_error' } });
    expect(outcome.error?.message).toMatch(/^TLS with 127\.0\.0\.1:\d+ failed: /);
  });

  it('never throws, even after close', async () => {
    const client = createDeliveryClient({ allowPrivate: true });
    await client.close();
    const outcome = await client.send({ url: 'http://127.0.0.1:9/', body });
    expect(outcome).toMatchObject({ ok: false, error: { code: 'network_error' } });
  });
});

describe('createDeliveryClient: options', () => {
  it.each([
    { connectTimeoutMs: 0 },
    { totalTimeoutMs: -1 },
    { maxResponseBytes: 1.5 },
    { connectionsPerOrigin: 0 },
  ])('rejects %o at creation', (options) => {
    expect(() => createDeliveryClient(options)).toThrow(TypeError);
  });
});
