import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createNodeRequest,
  createWebhookPath,
  ERROR_STATUS,
  errorResult,
  type Logger,
  PayhookError,
  type ReceiverRequest,
  toPayhookError,
  writeResponse,
} from '../src/index.js';

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** A Node server on loopback whose every request goes to `handler`; resolves with its base URL. */
async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const server = createServer(handler);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A framework's request as the mapping reads it: the Node request and what a parser left. */
interface FakeFrameworkRequest {
  req: IncomingMessage;
  ip: string;
  rawBody?: unknown;
  body?: unknown;
  consumed?: boolean;
}

const toRequest = createNodeRequest<FakeFrameworkRequest>({
  incoming: (from) => from.req,
  clientIp: (from) => from.ip,
  rawBody: (from) => from.rawBody,
  parsedBody: (from) => from.body,
  consumed: (from) => from.consumed ?? from.req.readableEnded,
});

/** Posts `body` to a server that builds the ReceiverRequest with `left` and answers what it saw. */
async function built(
  left: Omit<FakeFrameworkRequest, 'req' | 'ip'> = {},
  headers: Record<string, string> = {},
): Promise<Record<string, unknown>> {
  const url = await serve((req, res) => {
    const request: ReceiverRequest = toRequest({ req, ip: '198.51.100.7', ...left });
    const read = request.readBody ? request.readBody(1024).then(String) : Promise.resolve(undefined);
    read.then((readBody) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ ...request, readBody, hasReadBody: request.readBody !== undefined }));
    });
  });
  const res = await fetch(`${url}/webhooks`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: '{"a":1}',
  });
  return (await res.json()) as Record<string, unknown>;
}

describe('createNodeRequest', () => {
  it('takes method, Content-Type, addresses and X-Forwarded-For from the Node request, and reads its body', async () => {
    const seen = await built({}, { 'x-forwarded-for': '203.0.113.9' });
    expect(seen).toMatchObject({
      method: 'POST',
      contentType: 'application/json',
      remoteAddress: '127.0.0.1',
      clientIp: '198.51.100.7',
      forwardedFor: '203.0.113.9',
      hasReadBody: true,
      readBody: '{"a":1}',
    });
    expect(seen.rawBody).toBeUndefined();
    expect(seen.parsedBody).toBeUndefined();
  });

  it('uses a raw body a parser kept, as a string or bytes, and nothing else of it', async () => {
    expect(await built({ rawBody: '{"kept":true}', consumed: true })).toMatchObject({
      rawBody: '{"kept":true}',
      hasReadBody: false,
    });
    const bytes = await built({ rawBody: Buffer.from('{}'), body: { parsed: true }, consumed: true });
    expect(bytes.rawBody).toEqual({ type: 'Buffer', data: [123, 125] });
    expect(bytes.parsedBody).toBeUndefined();
    // Not a string or bytes (a parser's own object): ignored, the parsed body is used.
    const other = await built({ rawBody: { not: 'raw' }, body: { parsed: true }, consumed: true });
    expect(other.rawBody).toBeUndefined();
    expect(other.parsedBody).toEqual({ parsed: true });
  });

  it('hands over a parsed body only once the stream was consumed, and then reads nothing', async () => {
    expect(await built({ body: { parsed: true }, consumed: true })).toMatchObject({
      parsedBody: { parsed: true },
      hasReadBody: false,
    });
    // Not consumed: whatever sits in `body` is not a parser's work; the raw body is read.
    const unread = await built({ body: { stale: true }, consumed: false });
    expect(unread.parsedBody).toBeUndefined();
    expect(unread.readBody).toBe('{"a":1}');
  });

  it('reads from the stream the framework hands over instead of the Node request', async () => {
    const url = await serve((req, res) => {
      const transformed = Object.assign(new PassThrough(), { headers: {} });
      req.pipe(transformed);
      const request = toRequest({ req, ip: '127.0.0.1' }, transformed);
      request.readBody?.(1024).then((body) => res.end(`${String(body)}!`));
    });
    const res = await fetch(url, { method: 'POST', body: 'payload' });
    expect(await res.text()).toBe('payload!');
  });

  it('reads the Node request by default, and calls no optional mapping it was not given', async () => {
    const bare = createNodeRequest<IncomingMessage>({ incoming: (req) => req, clientIp: () => undefined });
    const url = await serve((req, res) => {
      const request = bare(req);
      request
        .readBody?.(1024)
        .then((body) =>
          res.end(JSON.stringify({ body: String(body), parsedBody: request.parsedBody ?? null })),
        );
    });
    const res = await fetch(url, { method: 'POST', body: 'x' });
    expect(await res.json()).toEqual({ body: 'x', parsedBody: null });
  });
});

describe('createWebhookPath', () => {
  it('matches the path with and without a trailing slash, and nothing below it', () => {
    const webhook = createWebhookPath('/webhooks//');
    expect(webhook.path).toBe('/webhooks');
    expect(webhook.urls).toEqual(['/webhooks', '/webhooks/']);
    expect(['/webhooks', '/webhooks/'].map(webhook.matches)).toEqual([true, true]);
    expect(['/webhooks/x', '/webhook', '/webhooks//', '/', ''].map(webhook.matches)).toEqual(
      Array(5).fill(false),
    );
  });

  it('at the root, matches "/" and the empty path a mount point leaves', () => {
    const root = createWebhookPath('/');
    expect(root.path).toBe('/');
    expect(root.urls).toEqual(['/']);
    expect(['/', ''].map(root.matches)).toEqual([true, true]);
    expect(root.matches('/x')).toBe(false);
  });

  it('refuses a path that does not start with "/" at creation, naming it', () => {
    expect(() => createWebhookPath('webhooks')).toThrow(
      new TypeError('Invalid path: webhooks (expected a path starting with "/").'),
    );
    expect(() => createWebhookPath(undefined as unknown as string)).toThrow(TypeError);
  });
});

/** An error with the fields a framework sets. */
const raised = (fields: Record<string, unknown>) => Object.assign(new Error('framework'), fields);

describe('toPayhookError', () => {
  it('maps a framework status to the stable code that goes with it', () => {
    const cases: [Record<string, unknown>, string, number][] = [
      [{ status: 413, type: 'entity.too.large' }, 'payload_too_large', 413],
      [{ statusCode: 413, code: 'FST_ERR_CTP_BODY_TOO_LARGE' }, 'payload_too_large', 413],
      [{ status: 400, type: 'entity.parse.failed' }, 'malformed_payload', 400],
      [{ status: 415, type: 'encoding.unsupported' }, 'unsupported_media_type', 415],
      [{ statusCode: 415, code: 'FST_ERR_CTP_INVALID_MEDIA_TYPE' }, 'unsupported_media_type', 415],
      // Another client error keeps its status (a parser's verify refusal, ctx.throw(429)).
      [{ status: 403, type: 'entity.verify.failed' }, 'malformed_payload', 403],
      [{ status: 429, expose: true }, 'malformed_payload', 429],
      [{ status: 502 }, 'internal_error', 500],
      [{}, 'internal_error', 500],
    ];
    for (const [fields, code, status] of cases) {
      const error = raised(fields);
      const translated = toPayhookError(error);
      expect([translated.code, translated.status], JSON.stringify(fields)).toEqual([code, status]);
      expect(translated.cause).toBe(error);
      expect(translated.message).not.toContain('framework');
    }
  });

  it('uses the name of a known framework error only when it carries no status', () => {
    expect(toPayhookError(raised({ type: 'entity.too.large' })).code).toBe('payload_too_large');
    expect(toPayhookError(raised({ code: 'FST_ERR_CTP_EMPTY_JSON_BODY' })).code).toBe('malformed_payload');
    expect(toPayhookError(raised({ type: 'charset.unsupported' })).code).toBe('unsupported_media_type');
    expect(toPayhookError(raised({ type: 'toString' })).code).toBe('internal_error');
    // A status outside 400-599, or not a number, is no status.
    expect(toPayhookError(raised({ status: '413' })).code).toBe('internal_error');
    expect(toPayhookError(raised({ status: 200, type: 'entity.too.large' })).code).toBe('payload_too_large');
  });

  it('returns a PayhookError as it is, and takes any thrown value', () => {
    const own = new PayhookError('queue_full', 'full');
    expect(toPayhookError(own)).toBe(own);
    expect(toPayhookError('a string').code).toBe('internal_error');
    expect(toPayhookError(null).status).toBe(ERROR_STATUS.internal_error);
  });
});

describe('errorResult', () => {
  const recording = () => {
    const lines: { obj: object; msg?: string }[] = [];
    const push = (obj: object, msg?: string) => {
      lines.push({ obj, msg });
    };
    const logger: Logger = { debug: push, info: push, warn: push, error: push };
    return { logger, lines };
  };

  it("answers with payhook's error body, and logs a server fault with its cause", () => {
    const { logger, lines } = recording();
    const fault = new Error('bug');
    expect(errorResult(fault, logger)).toEqual({
      status: 500,
      body: { error: { code: 'internal_error', message: expect.any(String) } },
      headers: {},
    });
    expect(lines).toEqual([{ obj: { err: fault }, msg: 'payhook: the webhook route failed' }]);
  });

  it("does not log a client's error", () => {
    const { logger, lines } = recording();
    expect(errorResult(raised({ status: 413 }), logger).status).toBe(413);
    expect(lines).toEqual([]);
  });
});

describe('writeResponse', () => {
  it('writes the status, headers and JSON body, then starts the work once the response is out', async () => {
    const order: string[] = [];
    const url = await serve((_req, res) => {
      res.on('finish', () => order.push('finish'));
      writeResponse(res, {
        status: 503,
        body: { error: { code: 'queue_full' } },
        headers: { 'retry-after': '10' },
        afterResponse: () => order.push('afterResponse'),
      });
    });
    const res = await fetch(url, { method: 'POST', body: '{}' });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('10');
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(await res.json()).toEqual({ error: { code: 'queue_full' } });
    await expect.poll(() => order).toEqual(['finish', 'afterResponse']);
  });
});
