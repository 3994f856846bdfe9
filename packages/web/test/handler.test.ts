// The Web handler's own promises, tried to break: acknowledge first under waitUntil, handlers
// before the answer, the body read once and refused while it streams, and client addresses
// where there is no socket. Over real HTTP on loopback where a server is involved.
import { createServer } from 'node:http';
import { getRequestListener } from '@hono/node-server';
import {
  createReceiver,
  type Logger,
  type ProcessedEvent,
  type Receiver,
  type ReceiverOptions,
  silentLogger,
} from '@payhook/core';
import { createTestEvent } from '@payhook/core/testing';
import { type ExecutionContext, Hono } from 'hono';
import { afterEach, describe, expect, it } from 'vitest';
import { BUSINESS_ID, type RunningApp, runningApp } from '../../../test/conformance/adapter-conformance.js';
import { createWebHandler, type WebHandlerOptions } from '../src/index.js';

const open: (RunningApp | Receiver)[] = [];
afterEach(async () => {
  for (const item of open.splice(0).reverse()) await item.close();
});

function receiverFor(options: Partial<ReceiverOptions> = {}): Receiver {
  const receiver = createReceiver({
    businessIds: [BUSINESS_ID],
    allowedIps: ['127.0.0.1', '::1'],
    recoveryIntervalMs: 0,
    retry: { attempts: 1 },
    logger: silentLogger,
    ...options,
  } as ReceiverOptions);
  open.push(receiver);
  return receiver;
}

/** Serves `fetch` on 127.0.0.1 with Node's HTTP server and @hono/node-server's Request bridge. */
async function serveFetch(fetch: (request: Request, env: unknown) => Promise<Response>): Promise<string> {
  const app = await runningApp(createServer(getRequestListener(fetch)).listen(0, '127.0.0.1'), '127.0.0.1');
  open.push(app);
  return `${app.url}/webhooks`;
}

const eventBody = () => JSON.stringify(createTestEvent('payment.session.succeeded', BUSINESS_ID));
const post = (url: string, body = eventBody(), headers: Record<string, string> = {}) =>
  fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });

/** A promise and the function that resolves it. */
function latch() {
  let open: () => void = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

/** A handler that records when it starts and ends, and waits for `gate` in between. */
function blockedHandler(receiver: Receiver, gate: Promise<void>, log: string[], fail = false) {
  receiver.on('payment.session.succeeded', async () => {
    log.push('handler started');
    await gate;
    log.push('handler finished');
    if (fail) throw new Error('the order database is down');
  });
}

async function waitFor(check: () => boolean, what: string): Promise<void> {
  for (let n = 0; !check(); n++) {
    if (n > 1000) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('acknowledge first, under waitUntil', () => {
  for (const [what, mount] of [
    [
      'the waitUntil option (Next.js after, Vercel waitUntil)',
      (receiver: Receiver, waitUntil: (p: Promise<unknown>) => void) => {
        const handler = createWebHandler(receiver, { waitUntil });
        return (request: Request) => handler(request);
      },
    ],
    [
      "a Worker's ctx, the third argument of fetch(request, env, ctx)",
      (receiver: Receiver, waitUntil: (p: Promise<unknown>) => void) => {
        const handler = createWebHandler(receiver);
        const env = { BUSINESS_ID };
        const ctx = { waitUntil, passThroughOnException() {} };
        return (request: Request) => handler(request, env, ctx);
      },
    ],
  ] as const) {
    it(`answers 200 while the handler is still blocked, and hands ${what} the promise of its end`, async () => {
      // A Worker has no socket to tell the address: the address is not what this test is about.
      const receiver = receiverFor({ allowAnyIp: true, allowedIps: undefined });
      const gate = latch();
      const log: string[] = [];
      blockedHandler(receiver, gate.opened, log);
      const held: Promise<unknown>[] = [];
      let settled = false;
      const url = await serveFetch(
        mount(receiver, (promise) => {
          held.push(promise);
          promise.then(() => {
            settled = true;
          });
        }),
      );
      const res = await post(url);
      log.push('response');
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ received: true });
      await waitFor(() => log.includes('handler started'), 'the handler to start');
      // The answer came while the handler waited on its latch, and waitUntil holds it still.
      expect(log).not.toContain('handler finished');
      expect(held).toHaveLength(1);
      expect(settled).toBe(false);
      gate.open();
      const outcome = (await held[0]) as ProcessedEvent;
      expect(outcome).toEqual({ outcome: 'done' });
      expect(log.slice(-1)).toEqual(['handler finished']);
      expect(receiver.stats().held).toBe(0);
      // A duplicate and a refusal start no work, so nothing more is handed to waitUntil.
      expect((await post(url, 'not json')).status).toBe(400);
      expect(held).toHaveLength(1);
    });
  }

  it("finds waitUntil on a Hono context's executionCtx, as Hono passes a Worker's ctx", async () => {
    const receiver = receiverFor({ allowAnyIp: true, allowedIps: undefined });
    const log: string[] = [];
    blockedHandler(receiver, Promise.resolve(), log);
    const handler = createWebHandler(receiver);
    const app = new Hono();
    app.all('/webhooks', (c) => handler(c.req.raw, c));
    const held: Promise<unknown>[] = [];
    const ctx: ExecutionContext = {
      waitUntil: (promise) => {
        held.push(promise);
      },
      passThroughOnException() {},
      props: {},
    };
    // A Worker's fetch(request, env, ctx), handed on to Hono as a Worker exports it.
    const res = await app.fetch(webRequest(eventBody()), { BUSINESS_ID }, ctx);
    expect(res.status).toBe(200);
    expect(held).toHaveLength(1);
    expect(await held[0]).toEqual({ outcome: 'done' });
    expect(log).toEqual(['handler started', 'handler finished']);
  });

  it("resolves waitUntil's promise with the failure of a handler that fails after every local retry", async () => {
    const receiver = receiverFor({ retry: { attempts: 2, minDelayMs: 1, maxDelayMs: 1 } });
    const log: string[] = [];
    blockedHandler(receiver, Promise.resolve(), log, true);
    const held: Promise<unknown>[] = [];
    const url = await serveFetch(createWebHandler(receiver, { waitUntil: (p) => held.push(p) }));
    expect((await post(url)).status).toBe(200);
    const outcome = (await held[0]) as ProcessedEvent;
    expect(outcome.outcome).toBe('failed');
    expect(log.filter((line) => line === 'handler finished')).toHaveLength(2);
  });

  it('without waitUntil, answers first and runs the handler in the queue, as the other adapters do', async () => {
    const receiver = receiverFor();
    const gate = latch();
    const log: string[] = [];
    blockedHandler(receiver, gate.opened, log);
    const url = await serveFetch(createWebHandler(receiver));
    expect((await post(url)).status).toBe(200);
    await waitFor(() => log.includes('handler started'), 'the handler to start');
    expect(log).toEqual(['handler started']);
    gate.open();
    await receiver.idle();
    expect(log).toEqual(['handler started', 'handler finished']);
  });
});

describe("processing: 'before-response'", () => {
  it('answers only once the handler has finished, 200 when it succeeded', async () => {
    const receiver = receiverFor();
    const gate = latch();
    const log: string[] = [];
    blockedHandler(receiver, gate.opened, log);
    const url = await serveFetch(createWebHandler(receiver, { processing: 'before-response' }));
    const answered = post(url).then((res) => {
      log.push('response');
      return res;
    });
    await waitFor(() => log.includes('handler started'), 'the handler to start');
    gate.open();
    const res = await answered;
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ received: true });
    expect(log).toEqual(['handler started', 'handler finished', 'response']);
  });

  it('answers 500 handler_failed when the handler failed, and takes the retry of the same event', async () => {
    const receiver = receiverFor();
    let healthy = false;
    let runs = 0;
    receiver.on('payment.session.succeeded', () => {
      runs++;
      if (!healthy) throw new Error('the order database is down');
    });
    const url = await serveFetch(createWebHandler(receiver, { processing: 'before-response' }));
    const body = eventBody();
    const failed = await post(url, body);
    expect(failed.status).toBe(500);
    const answer = (await failed.json()) as { error: { code: string; message: string } };
    expect(answer.error.code).toBe('handler_failed');
    // The handler's own error stays in the receiver's log, never in the answer.
    expect(answer.error.message).not.toContain('database');
    healthy = true;
    // The sender retries a non-2xx answer: the failed event is claimed again and processed.
    const retried = await post(url, body);
    expect(retried.status).toBe(200);
    expect(await retried.json()).toEqual({ received: true });
    expect(runs).toBe(2);
    expect(await (await post(url, body)).json()).toEqual({ received: true, duplicate: true });
    expect(runs).toBe(2);
  });

  it('answers 500 handler_timeout when the handler ran past handlerTimeoutMs', async () => {
    const receiver = receiverFor({ handlerTimeoutMs: 30 });
    receiver.on('payment.session.succeeded', () => new Promise(() => {}));
    const url = await serveFetch(createWebHandler(receiver, { processing: 'before-response' }));
    const res = await post(url);
    expect(res.status).toBe(500);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('handler_timeout');
  });

  it('refuses an unknown processing mode at creation', () => {
    const receiver = receiverFor();
    expect(() =>
      createWebHandler(receiver, { processing: 'before' as WebHandlerOptions['processing'] }),
    ).toThrow(/Invalid processing: before/);
  });
});

/** A body stream that counts what was pulled from it, and whether it was cancelled. */
function countingStream(chunks: Iterable<Uint8Array>) {
  const seen = { pulled: 0, pulls: 0, cancelled: false };
  const iterator = chunks[Symbol.iterator]();
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      const next = iterator.next();
      if (next.done) {
        controller.close();
        return;
      }
      seen.pulls++;
      seen.pulled += next.value.byteLength;
      controller.enqueue(next.value);
    },
    cancel() {
      seen.cancelled = true;
    },
  });
  return { stream, seen };
}

function* endless(size: number) {
  const chunk = new Uint8Array(size).fill(0x20);
  for (;;) yield chunk;
}

const webRequest = (body: ReadableStream<Uint8Array> | string, headers: Record<string, string> = {}) =>
  new Request('http://127.0.0.1/webhooks', {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
    duplex: 'half',
  } as RequestInit);

describe('the body, read once', () => {
  it('reads the body from its stream once, and accepts the event', async () => {
    const receiver = receiverFor({ allowAnyIp: true, allowedIps: undefined });
    const handler = createWebHandler(receiver);
    const body = new TextEncoder().encode(eventBody());
    // Three chunks: the handler joins them, and pulls each exactly once.
    const parts = [body.subarray(0, 10), body.subarray(10, 500), body.subarray(500)];
    const { stream, seen } = countingStream(parts);
    const request = webRequest(stream);
    const res = await handler(request);
    expect(res.status).toBe(200);
    expect(seen).toEqual({ pulled: body.byteLength, pulls: 3, cancelled: false });
    expect(request.bodyUsed).toBe(true);
  });

  it('answers 500 internal_error, and says why in the log, when something read the body first', async () => {
    const lines: string[] = [];
    const logger: Logger = {
      ...silentLogger,
      error: (fields: unknown) => {
        lines.push(String((fields as { err?: Error }).err?.message));
      },
    } as Logger;
    const receiver = receiverFor({ allowAnyIp: true, allowedIps: undefined, logger });
    const handler = createWebHandler(receiver);
    const request = webRequest(eventBody());
    await request.text();
    const res = await handler(request);
    expect(res.status).toBe(500);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('internal_error');
    expect(lines.join('\n')).toMatch(/body was already read.*c\.req\.raw/);
    // A body locked by a reader elsewhere is the same mistake.
    const locked = webRequest(eventBody());
    locked.body?.getReader();
    expect((await handler(locked)).status).toBe(500);
    expect(lines).toHaveLength(2);
  });

  it('refuses a streamed body past maxBodyBytes with 413 without reading it all (no drain: cancelled)', async () => {
    const receiver = receiverFor({
      allowAnyIp: true,
      allowedIps: undefined,
      maxBodyBytes: 64 * 1024,
      maxDrainBytes: 0,
    });
    const handler = createWebHandler(receiver);
    const { stream, seen } = countingStream(endless(16 * 1024));
    const res = await handler(webRequest(stream));
    expect(res.status).toBe(413);
    expect(res.headers.get('connection')).toBe('close');
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('payload_too_large');
    await waitFor(() => seen.cancelled, 'the stream to be cancelled');
    // The limit plus at most the chunk that passed it and the one the stream keeps queued.
    expect(seen.pulled).toBeLessThanOrEqual(64 * 1024 + 2 * 16 * 1024);
  });

  it('drains a refused body only up to maxDrainBytes, then cancels it', async () => {
    const MiB = 1024 * 1024;
    const receiver = receiverFor({
      allowAnyIp: true,
      allowedIps: undefined,
      maxBodyBytes: MiB,
      maxDrainBytes: 2 * MiB,
    });
    const handler = createWebHandler(receiver);
    const { stream, seen } = countingStream(endless(64 * 1024));
    expect((await handler(webRequest(stream))).status).toBe(413);
    await waitFor(() => seen.cancelled, 'the drain to stop');
    expect(seen.pulled).toBeGreaterThan(MiB);
    expect(seen.pulled).toBeLessThanOrEqual(2 * MiB + 2 * 64 * 1024);
  });

  it('refuses a declared Content-Length over the limit before reading a byte', async () => {
    const receiver = receiverFor({
      allowAnyIp: true,
      allowedIps: undefined,
      maxBodyBytes: 1024,
      maxDrainBytes: 0,
    });
    const handler = createWebHandler(receiver);
    const { stream, seen } = countingStream(endless(4096));
    const res = await handler(webRequest(stream, { 'content-length': String(10 * 1024 * 1024) }));
    expect(res.status).toBe(413);
    await waitFor(() => seen.cancelled, 'the stream to be cancelled');
    // A stream fills its queue once on its own (highWaterMark 1); the handler read none of it.
    expect(seen.pulls).toBeLessThanOrEqual(1);
  });

  it('answers 400 malformed_payload when the body stream fails midway', async () => {
    const receiver = receiverFor({ allowAnyIp: true, allowedIps: undefined });
    const handler = createWebHandler(receiver);
    let sent = false;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent) controller.error(new Error('connection reset'));
        else controller.enqueue(new TextEncoder().encode('{"event":'));
        sent = true;
      },
    });
    const res = await handler(webRequest(stream));
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('malformed_payload');
  });
});

describe('client addresses without a socket', () => {
  it('refuses with 500 client_address_unknown, naming the option, when an allow-list has no address to check', async () => {
    const receiver = receiverFor();
    let ran = false;
    receiver.onAny(() => {
      ran = true;
    });
    const handler = createWebHandler(receiver);
    const res = await handler(webRequest(eventBody()), { params: Promise.resolve({}) });
    expect(res.status).toBe(500);
    const { error } = (await res.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('client_address_unknown');
    expect(error.message).toMatch(/getClientAddress/);
    expect(error.message).toMatch(/allowAnyIp/);
    await receiver.idle();
    expect(ran).toBe(false);
  });

  it('takes the address getClientAddress gives, with the arguments after the request', async () => {
    const receiver = receiverFor({ allowedIps: ['203.0.113.7'] });
    const seen: unknown[][] = [];
    const handler = createWebHandler(receiver, {
      getClientAddress: (request, ...context) => {
        seen.push(context);
        return request.headers.get('x-real-ip') ?? undefined;
      },
    });
    const context = { params: Promise.resolve({}) };
    expect((await handler(webRequest(eventBody(), { 'x-real-ip': '203.0.113.7' }), context)).status).toBe(
      200,
    );
    expect((await handler(webRequest(eventBody(), { 'x-real-ip': '198.51.100.1' }), context)).status).toBe(
      403,
    );
    // Unknown is unknown: the handler does not fall back to a guess.
    const missing = await handler(webRequest(eventBody()), context);
    expect(((await missing.json()) as { error: { code: string } }).error.code).toBe('client_address_unknown');
    expect(seen[0]).toEqual([context]);
  });

  it('ignores a CF-Connecting-IP a client sends to a server not behind Cloudflare', async () => {
    const receiver = receiverFor({ allowedIps: ['203.0.113.7'] });
    const url = await serveFetch(createWebHandler(receiver));
    const spoofed = await post(url, eventBody(), { 'cf-connecting-ip': '203.0.113.7' });
    expect(spoofed.status).toBe(403);
    expect(((await spoofed.json()) as { error: { code: string } }).error.code).toBe('ip_not_allowed');
  });

  it('reads CF-Connecting-IP with trustCloudflare, and refuses a request without it', async () => {
    const receiver = receiverFor({ allowedIps: ['203.0.113.7'] });
    const url = await serveFetch(createWebHandler(receiver, { trustCloudflare: true }));
    expect((await post(url, eventBody(), { 'cf-connecting-ip': '203.0.113.7' })).status).toBe(200);
    // Not through Cloudflare: the socket's address is not taken in its place.
    const direct = await post(url, eventBody());
    expect(((await direct.json()) as { error: { code: string } }).error.code).toBe('client_address_unknown');
  });

  it("applies the receiver's trustedProxies to the address the handler found", async () => {
    const receiver = receiverFor({ allowedIps: ['203.0.113.7'], trustedProxies: ['127.0.0.1/8'] });
    const url = await serveFetch(createWebHandler(receiver));
    expect((await post(url, eventBody(), { 'x-forwarded-for': '203.0.113.7' })).status).toBe(200);
    expect((await post(url, eventBody(), { 'x-forwarded-for': '203.0.113.7, 198.51.100.2' })).status).toBe(
      403,
    );
  });
});

describe('the path', () => {
  it('answers 404 not_found off the webhook path, and serves it with and without a trailing slash', async () => {
    const receiver = receiverFor();
    const url = await serveFetch(createWebHandler(receiver, { path: '/webhooks' }));
    const base = url.replace(/\/webhooks$/, '');
    for (const path of ['/', '/webhook', '/webhooks/x', '/webhooksx', '/other']) {
      const res = await post(`${base}${path}`);
      expect(res.status, path).toBe(404);
      expect(((await res.json()) as { error: { code: string } }).error.code, path).toBe('not_found');
    }
    expect((await post(`${base}/webhooks/`)).status).toBe(200);
    expect((await post(`${base}/webhooks?attempt=2`)).status).toBe(200);
  });
});
