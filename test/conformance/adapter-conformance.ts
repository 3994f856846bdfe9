import { createHmac } from 'node:crypto';
import { request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  createMemoryStore,
  createReceiver,
  type DeadLetter,
  type ErrorInfo,
  encodeEnvelope,
  type IdempotencyStore,
  type PayhookEvent,
  type Receiver,
  type ReceiverOptions,
  silentLogger,
  type UnrecognizedEvent,
} from '@payhook/core';
import { createTestEvent, signEvent } from '@payhook/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { oversizedBody, writeThenRead } from '../support/raw-http.js';
import { describeFrameworkErrors } from './framework-errors.js';
import { describeSignatureRows } from './signature-rows.js';

/** A running app with the adapter mounted at /webhooks. */
export interface RunningApp {
  /** Base URL, such as http://127.0.0.1:PORT */
  url: string;
  close(): Promise<void>;
}

/** How one adapter (and framework version) is started for the suite. */
export interface AdapterHarness {
  /** True when the framework's usual body parser keeps the raw body for payhook (Koa's
   *  @koa/bodyparser): then the parsed mode keeps the full protection of the raw body. */
  parserKeepsRawBody?: boolean;
  /** Which mountings to run (default both). Fastify runs raw only: its plugin registers the
   *  webhook route with its own encapsulated content-type parser, so Fastify's JSON parser never
   *  runs before payhook there and there is no "after the body parser" mounting to test. */
  modes?: readonly ('raw' | 'parsed')[];
  /** Options every receiver of the suite is created with (core's own run: `crypto: 'web'`). */
  receiverOptions?: Partial<ReceiverOptions>;
  /** Mounts `receiver` at POST /webhooks on a fresh app listening on `host` port 0. With
   *  `bodyParser`, the framework's usual JSON body parser runs first, with a limit of `parserLimitBytes`.
   *  With `failBefore`, a step that runs before payhook (a middleware, Fastify's onRequest hook)
   *  fails every request with that error, handed on as the framework hands on its own. */
  start(
    receiver: Receiver,
    options: { bodyParser: boolean; host: string; parserLimitBytes: number; failBefore?: Error },
  ): Promise<RunningApp>;
}

/** Waits for a Node server (from `app.listen(0, host)`) to listen, and wraps it as a {@link RunningApp}. */
export async function runningApp(server: Server, host: string): Promise<RunningApp> {
  if (!server.listening) {
    await new Promise<void>((resolve, reject) => {
      server.once('listening', resolve);
      server.once('error', reject);
    });
  }
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export const BUSINESS_ID = '0b7f3c1e-2a44-4d8e-9a61-5c2f1e7d9b30';
const PARSER_LIMIT = 100 * 1024;

interface Seen {
  events: PayhookEvent[];
  unrecognized: UnrecognizedEvent[];
  errors: { error: unknown; info: ErrorInfo }[];
  dead: DeadLetter[];
}

/** The JSON bodies the receiver answers with. */
interface AnswerBody {
  received?: boolean;
  duplicate?: boolean;
  error: { code: string; message: string; details?: { field?: string; message: string }[] };
}
const json = (res: Response) => res.json() as Promise<AnswerBody>;

const MiB = 1024 * 1024;
// Built once: the oversized bodies the 413 tests write, again and again.
const bodies = new Map<number, Buffer>();
const bodyOf = (size: number) => {
  const body = bodies.get(size) ?? oversizedBody(size);
  bodies.set(size, body);
  return body;
};

/** Content-Type values that are not JSON media types, however a parser reads them. */
const NOT_JSON_TYPES = [
  '',
  ';',
  ' ; ',
  'application',
  '/',
  'json',
  ';charset=utf-8',
  'application/json garbage',
];

const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(check: () => boolean, what: string, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await wait(5);
  }
}

/**
 * A memory store that is unreachable while `down` is set: every operation rejects, as a Redis
 * store's command does past its `commandTimeoutMs`. The receiver treats a rejected claim as an
 * unavailable store (503 `store_unavailable`, reported to onError with phase `store`).
 */
function unreachableStore(): { store: IdempotencyStore; state: { down: boolean; refused: number } } {
  const inner = createMemoryStore();
  const state = { down: true, refused: 0 };
  const unavailable = (command: string) => {
    state.refused++;
    const error = new Error(`The store did not answer ${command} in time.`);
    error.name = 'StoreTimeoutError';
    return Promise.reject(error);
  };
  const store: IdempotencyStore = {
    claim: (key, claim) => (state.down ? unavailable('claim') : inner.claim(key, claim)),
    renew: (key, owner, leaseMs) => (state.down ? unavailable('renew') : inner.renew(key, owner, leaseMs)),
    complete: (key, owner) => (state.down ? unavailable('complete') : inner.complete(key, owner)),
    fail: (key, owner, error) => (state.down ? unavailable('fail') : inner.fail(key, owner, error)),
    recover: (owner, leaseMs, limit) =>
      state.down ? unavailable('recover') : inner.recover(owner, leaseMs, limit),
    get: (key) => (state.down ? unavailable('get') : inner.get(key)),
  };
  return { store, state };
}

/** A body signed over a PHP-style encoding (escaped "/" and non-ASCII): only lexical verifies it. */
function phpSignedBody(): string {
  const data = '{"description":"Caf\\u00e9 \\/ bar","id":"d3b07384-d9a0-4c4b-8f7e-1c2d3e4f5a6b"}';
  const event = 'payment.session.created';
  const checksum = createHmac('sha256', BUSINESS_ID).update(`${event}|${data}`).digest('hex');
  return encodeEnvelope(event, data, checksum);
}

/**
 * The adapter conformance suite: every row of the receiver's status table (docs/design.md, "The
 * receiver pipeline") over real HTTP, run against each adapter and framework version, with and
 * without the framework's body parser.
 */
export function describeAdapterConformance(name: string, harness: AdapterHarness): void {
  // Every harness runs the raw mounting; the parsed one unless the harness says it has none
  // (Fastify: its plugin's route parses its own body, see `AdapterHarness.modes`).
  for (const bodyParser of (harness.modes ?? ['raw', 'parsed']).map((m) => m === 'parsed')) {
    describe(`${name} conformance (${bodyParser ? 'after the body parser' : 'raw body'})`, () => {
      const running: (RunningApp | Receiver)[] = [];
      afterEach(async () => {
        for (const item of running.splice(0).reverse()) {
          await ('handle' in item ? item.close() : item.close());
        }
      });

      /** A payment.session.failed handler that throws (its store is down) until `heal()`. */
      function failingUntilHealed(receiver: Receiver) {
        let healthy = false;
        const handler = {
          calls: 0,
          heal: () => {
            healthy = true;
          },
        };
        receiver.on('payment.session.failed', () => {
          handler.calls++;
          if (!healthy) throw new Error('database down');
        });
        return handler;
      }

      async function setup(options: Partial<ReceiverOptions> = {}, host = '127.0.0.1') {
        const seen: Seen = { events: [], unrecognized: [], errors: [], dead: [] };
        const receiver = createReceiver({
          businessIds: [BUSINESS_ID],
          allowedIps: ['127.0.0.1', '::1'],
          retry: { attempts: 3, minDelayMs: 1, maxDelayMs: 5 },
          recoveryIntervalMs: 0,
          // Refusals are the suite's daily bread: quiet unless a test brings its own logger.
          logger: silentLogger,
          ...harness.receiverOptions,
          ...options,
        } as ReceiverOptions);
        receiver.onAny((event) => {
          seen.events.push(event);
        });
        receiver.onUnrecognized((info) => {
          seen.unrecognized.push(info);
        });
        receiver.onError((error, info) => seen.errors.push({ error, info }));
        receiver.onDeadLetter((letter) => {
          seen.dead.push(letter);
        });
        const app = await harness.start(receiver, { bodyParser, host, parserLimitBytes: PARSER_LIMIT });
        running.push(receiver, app);
        const post = (body: string, headers: Record<string, string> = {}, path = '/webhooks') =>
          fetch(`${app.url}${path}`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', ...headers },
            body,
          });
        return { receiver, app, seen, post };
      }

      const validBody = (name = 'payment.session.succeeded' as const) =>
        JSON.stringify(createTestEvent(name, BUSINESS_ID));

      it('accepts a valid event with 200 and hands the handler the verified object', async () => {
        const { seen, post, receiver } = await setup();
        const body = validBody();
        const res = await post(body);
        expect(res.status).toBe(200);
        expect(await json(res)).toEqual({ received: true });
        await receiver.idle();
        await waitFor(() => seen.events.length === 1, 'the handler');
        expect(seen.events[0]).toEqual(JSON.parse(body));
      });

      it('matches the path with and without a trailing slash', async () => {
        const { post } = await setup();
        expect((await post(validBody(), {}, '/webhooks/')).status).toBe(200);
      });

      it('acknowledges a duplicate delivery without running the handler again', async () => {
        const { seen, post, receiver } = await setup();
        const body = validBody();
        expect((await post(body)).status).toBe(200);
        await receiver.idle();
        const again = await post(body);
        expect(again.status).toBe(200);
        expect(await json(again)).toEqual({ received: true, duplicate: true });
        await receiver.idle();
        expect(seen.events).toHaveLength(1);
      });

      it('runs the handler once for concurrent identical deliveries', async () => {
        const { seen, post, receiver } = await setup();
        const body = validBody();
        const responses = await Promise.all(Array.from({ length: 12 }, () => post(body)));
        expect(responses.map((r) => r.status)).toEqual(Array(12).fill(200));
        const bodies = await Promise.all(responses.map(json));
        expect(bodies.filter((b) => b.duplicate !== true)).toHaveLength(1);
        await receiver.idle();
        await wait(20);
        expect(seen.events).toHaveLength(1);
      });

      it('refuses an address outside the allow-list with 403 ip_not_allowed', async () => {
        const { post, seen } = await setup({ allowedIps: ['203.0.113.0/24'] });
        const res = await post(validBody());
        expect(res.status).toBe(403);
        expect((await json(res)).error.code).toBe('ip_not_allowed');
        expect(seen.events).toHaveLength(0);
      });

      it('matches an IPv4 client against an IPv4-mapped IPv6 entry', async () => {
        const { post } = await setup({ allowedIps: ['::ffff:127.0.0.1'] });
        expect((await post(validBody())).status).toBe(200);
      });

      it('serves IPv6 clients', async () => {
        const { post } = await setup({ allowedIps: ['::1/128'] }, '::1');
        expect((await post(validBody())).status).toBe(200);
      });

      it('ignores spoofed X-Forwarded-For entries left of the trusted proxy', async () => {
        const { post } = await setup({ allowedIps: ['203.0.113.7'], trustedProxies: ['127.0.0.1/8'] });
        // The proxy (us, 127.0.0.1) appended the real client last; the first entry is the client's lie.
        const spoofed = await post(validBody(), { 'x-forwarded-for': '203.0.113.7, 198.51.100.23' });
        expect(spoofed.status).toBe(403);
        const genuine = await post(validBody(), { 'x-forwarded-for': '198.51.100.23, 203.0.113.7' });
        expect(genuine.status).toBe(200);
        // Without a trusted proxy configured, the header is not read at all.
      });

      it('does not read X-Forwarded-For without trustedProxies', async () => {
        const { post } = await setup({ allowedIps: ['203.0.113.7'] });
        expect((await post(validBody(), { 'x-forwarded-for': '203.0.113.7' })).status).toBe(403);
      });

      it('answers 405 to other methods on the webhook path', async () => {
        const { app } = await setup();
        for (const method of ['GET', 'PUT', 'DELETE']) {
          const res = await fetch(`${app.url}/webhooks`, { method });
          expect(res.status, method).toBe(405);
        }
      });

      it('answers 415 to a body that is not JSON', async () => {
        const { post } = await setup();
        const res = await post(validBody(), { 'content-type': 'text/plain' });
        expect(res.status).toBe(415);
      });

      it('answers 415 unsupported_media_type to an empty, a ";" and other Content-Types that are not JSON', async () => {
        const { app } = await setup();
        for (const contentType of NOT_JSON_TYPES) {
          const answer = await writeThenRead({
            url: app.url,
            body: Buffer.from(validBody()),
            contentType,
            headers: { connection: 'close' },
          });
          expect(answer.status, JSON.stringify(contentType)).toBe(415);
          expect(JSON.parse(answer.body).error.code, JSON.stringify(contentType)).toBe(
            'unsupported_media_type',
          );
        }
      });

      it('answers 415 unsupported_media_type to a body without a Content-Type', async () => {
        const { app } = await setup();
        const answer = await writeThenRead({
          url: app.url,
          body: Buffer.from(validBody()),
          contentType: null,
          headers: { connection: 'close' },
        });
        expect(answer.status).toBe(415);
        expect(JSON.parse(answer.body).error.code).toBe('unsupported_media_type');
      });

      it('checks the client address before the Content-Type: 403 to a refused address, whatever the type', async () => {
        const { app } = await setup({ allowedIps: ['203.0.113.0/24'] });
        for (const contentType of [';', '', 'text/plain']) {
          const answer = await writeThenRead({
            url: app.url,
            body: Buffer.from(validBody()),
            contentType,
            headers: { connection: 'close' },
          });
          expect(answer.status, JSON.stringify(contentType)).toBe(403);
          expect(JSON.parse(answer.body).error.code).toBe('ip_not_allowed');
        }
      });

      it('answers 400 malformed_payload to invalid JSON and missing fields', async () => {
        const { post } = await setup();
        for (const body of ['{"event":', '{"event":"payment.session.created","data":{}}', '[]']) {
          const res = await post(body);
          expect(res.status, body).toBe(400);
          if (!bodyParser || body.startsWith('{"event":"')) {
            expect((await json(res)).error.code, body).toBe('malformed_payload');
          }
        }
      });

      it('answers 400 malformed_payload to a checksum that is not 64 hex digits', async () => {
        const { post, seen, receiver } = await setup();
        const event = createTestEvent('payment.session.succeeded', BUSINESS_ID);
        const checksums = {
          '63 hex digits': event.checksum.slice(0, 63),
          '65 hex digits': `${event.checksum}0`,
          '64 characters, one not hex': `${event.checksum.slice(0, 63)}g`,
          '64 characters, with a 0x prefix': `0x${event.checksum.slice(0, 62)}`,
          'a number': 1234,
        };
        for (const [what, checksum] of Object.entries(checksums)) {
          const res = await post(JSON.stringify({ ...event, checksum }));
          expect(res.status, what).toBe(400);
          const { error } = await json(res);
          expect(error.code, what).toBe('malformed_payload');
          // Refused for the checksum's form, before any HMAC.
          expect(
            error.details?.map((d) => d.field),
            what,
          ).toEqual(['checksum']);
        }
        // The same event with its checksum intact is accepted: only the checksum's form was refused.
        expect((await post(JSON.stringify(event))).status).toBe(200);
        await receiver.idle();
        expect(seen.events).toHaveLength(1);
      });

      it('answers 401 invalid_checksum to a bad checksum', async () => {
        const { post, seen } = await setup();
        const event = createTestEvent('payment.session.succeeded', 'some-other-business');
        const res = await post(JSON.stringify(event));
        expect(res.status).toBe(401);
        expect((await json(res)).error.code).toBe('invalid_checksum');
        expect(seen.events).toHaveLength(0);
      });

      it('accepts an unknown event name with 200 and hands it to onUnrecognized', async () => {
        const { post, seen, receiver } = await setup();
        const res = await post(
          JSON.stringify(signEvent('payment.refund.created', { id: 'r_1' }, BUSINESS_ID)),
        );
        expect(res.status).toBe(200);
        await receiver.idle();
        expect(seen.unrecognized).toHaveLength(1);
        expect(seen.unrecognized[0]?.reason).toBe('unknown_event');
      });

      it('acknowledges, retries, then dead-letters a handler that throws; replay runs it again', async () => {
        const { receiver, post, seen } = await setup();
        const handler = failingUntilHealed(receiver);
        const res = await post(validBody('payment.session.failed' as never));
        expect(res.status).toBe(200);
        await receiver.idle();
        expect(handler.calls).toBe(3);
        expect(seen.dead).toHaveLength(1);
        expect(seen.dead[0]?.attempts).toBe(3);
        expect(seen.errors.filter((e) => e.info.phase === 'handler')).toHaveLength(3);
        handler.heal();
        expect(await receiver.replay(seen.dead[0]?.key as string)).toEqual({ status: 'replayed' });
        await receiver.idle();
        expect(handler.calls).toBe(4);
        expect(await receiver.replay(seen.dead[0]?.key as string)).toEqual({
          status: 'not_failed',
          state: 'done',
        });
      });

      it('claims a dead-lettered event again when it is delivered again, and processes it', async () => {
        const { receiver, post, seen } = await setup();
        const handler = failingUntilHealed(receiver);
        const body = validBody('payment.session.failed' as never);
        const first = await post(body);
        expect(first.status).toBe(200);
        expect(await json(first)).toEqual({ received: true });
        await receiver.idle();
        expect(handler.calls).toBe(3);
        expect(seen.dead).toHaveLength(1);
        // The sender saw the 200 but delivers the same bytes again (a manual redelivery, say):
        // a second chance, not a duplicate.
        handler.heal();
        const again = await post(body);
        expect(again.status).toBe(200);
        expect(await json(again)).toEqual({ received: true });
        await receiver.idle();
        expect(handler.calls).toBe(4);
        expect(seen.events).toHaveLength(4);
        expect(seen.events[3]).toEqual(JSON.parse(body));
        expect(seen.dead).toHaveLength(1);
        // Done now: a third delivery is a duplicate.
        const third = await post(body);
        expect(third.status).toBe(200);
        expect(await json(third)).toEqual({ received: true, duplicate: true });
        await receiver.idle();
        expect(handler.calls).toBe(4);
      });

      it('claims a failed event again even while its dead-letter callback still runs', async () => {
        const { receiver, post, seen } = await setup({ retry: { attempts: 1 } });
        const handler = failingUntilHealed(receiver);
        let release: () => void = () => {};
        receiver.onDeadLetter(
          () =>
            new Promise<void>((resolve) => {
              release = resolve;
            }),
        );
        const body = validBody('payment.session.failed' as never);
        expect((await post(body)).status).toBe(200);
        // The store has the event as failed; the (slow) dead-letter callback is still running.
        await waitFor(() => seen.dead.length === 1, 'the dead letter');
        handler.heal();
        const again = await post(body);
        expect(again.status).toBe(200);
        expect(await json(again)).toEqual({ received: true });
        await waitFor(() => handler.calls === 2, 'the second chance');
        release();
        await receiver.idle();
        expect(seen.dead).toHaveLength(1);
        expect(await json(await post(body))).toEqual({ received: true, duplicate: true });
      });

      it('answers 503 store_unavailable while the store is unreachable, then accepts the retry', async () => {
        const { store, state } = unreachableStore();
        const { receiver, post, seen } = await setup({ store });
        const body = validBody();
        for (let n = 0; n < 2; n++) {
          const res = await post(body);
          expect(res.status).toBe(503);
          expect(res.headers.get('retry-after')).toBe('5');
          expect((await json(res)).error.code).toBe('store_unavailable');
        }
        await receiver.idle();
        await wait(20);
        expect(seen.events).toHaveLength(0);
        expect(state.refused).toBe(2);
        expect(seen.errors.map((e) => e.info.phase)).toEqual(['store', 'store']);
        // The store is back: the sender's retry of the same delivery is accepted and processed once.
        state.down = false;
        const retried = await post(body);
        expect(retried.status).toBe(200);
        expect(await json(retried)).toEqual({ received: true });
        await receiver.idle();
        await waitFor(() => seen.events.length === 1, 'the handler');
        expect(seen.events[0]).toEqual(JSON.parse(body));
        const again = await post(body);
        expect(await json(again)).toEqual({ received: true, duplicate: true });
        await receiver.idle();
        expect(seen.events).toHaveLength(1);
        expect(seen.dead).toHaveLength(0);
      });

      it('times out a handler that hangs', async () => {
        const { receiver, post, seen } = await setup({ handlerTimeoutMs: 30, retry: { attempts: 1 } });
        receiver.on('payment.session.created', () => new Promise(() => {}));
        expect((await post(validBody('payment.session.created' as never))).status).toBe(200);
        await receiver.idle();
        expect(seen.errors.map((e) => (e.error as { code?: string }).code)).toContain('handler_timeout');
        expect(seen.dead).toHaveLength(1);
      });

      it('writes the 200 before any handler runs; a slow handler does not delay it', async () => {
        const { receiver, post } = await setup();
        let release: () => void = () => {};
        let started = false;
        receiver.on('payment.session.succeeded', () => {
          started = true;
          return new Promise<void>((resolve) => {
            release = resolve;
          });
        });
        const res = await post(validBody());
        expect(res.status).toBe(200);
        await waitFor(() => started, 'the handler to start');
        release();
        await receiver.idle();
      });

      it('drains accepted work on close, and answers 503 shutting_down afterwards', async () => {
        const { receiver, post, seen } = await setup({ concurrency: 2 });
        receiver.on('payment.session.succeeded', () => wait(15));
        const bodies = Array.from({ length: 10 }, () => validBody());
        for (const body of bodies) expect((await post(body)).status).toBe(200);
        const closed = receiver.close();
        const late = await post(validBody());
        expect(late.status).toBe(503);
        expect((await json(late)).error.code).toBe('shutting_down');
        await closed;
        expect(seen.events).toHaveLength(10);
      });

      describeSignatureRows(BUSINESS_ID, setup);

      if (!bodyParser || harness.parserKeepsRawBody) {
        it('refuses duplicate keys with 400', async () => {
          const { post } = await setup();
          const body = validBody().replace('{"event":', '{"event":"x","event":');
          const res = await post(body);
          expect(res.status).toBe(400);
          expect((await json(res)).error.code).toBe('malformed_payload');
        });

        it('verifies a lexical-only (PHP-encoded) sender', async () => {
          const { post } = await setup();
          expect((await post(phpSignedBody())).status).toBe(200);
        });
      }
      if (!bodyParser) {
        it('answers 413 to an oversized body before the body ends', async () => {
          const { app } = await setup({ maxBodyBytes: 4096 });
          const status = await new Promise<number>((resolve, reject) => {
            const url = new URL(`${app.url}/webhooks`);
            const req = httpRequest(
              {
                host: url.hostname,
                port: url.port,
                path: url.pathname,
                method: 'POST',
                headers: { 'content-type': 'application/json' },
              },
              (res) => {
                res.resume();
                resolve(res.statusCode ?? 0);
              },
            );
            req.on('error', reject);
            // Chunked, no Content-Length: the first 8 KiB pass the limit, and the rest is never sent.
            req.write(`{"event":"payment.session.created","data":"${'x'.repeat(8192)}`);
            running.push({ url: '', close: async () => void req.destroy() });
          });
          expect(status).toBe(413);
        });

        it('accepts JSON media types written loosely (case, parameters, a trailing ";")', async () => {
          const { post } = await setup();
          for (const contentType of [
            'Application/JSON',
            'application/json;',
            'application/json; charset=utf-8',
            'application/json;charset=UTF-8; foo=bar',
            'application/vnd.payhook+json',
          ]) {
            const res = await post(validBody(), { 'content-type': contentType });
            expect(res.status, contentType).toBe(200);
          }
        });

        // A client that writes its whole body before it reads (as many do) must read the 413, not
        // a reset: the receiver reads and discards the rest of the body up to its drain cap.
        for (const [label, size, times] of [
          ['2 MiB', 2 * MiB, 20],
          ['16 MiB', 16 * MiB, 20],
        ] as const) {
          for (const chunked of [false, true]) {
            it(`answers a ${label} body (${chunked ? 'chunked' : 'Content-Length'}) with a 413 that a client writing it all first reads`, async () => {
              const { app, post } = await setup();
              for (let attempt = 1; attempt <= times; attempt++) {
                const answer = await writeThenRead({ url: app.url, body: bodyOf(size), chunked });
                const what = `attempt ${attempt}: ${JSON.stringify(answer)}`;
                expect(answer.writeError, what).toBeUndefined();
                expect(answer.status, what).toBe(413);
                expect(answer.headers.connection, what).toBe('close');
                expect(JSON.parse(answer.body).error.code, what).toBe('payload_too_large');
              }
              expect((await post(validBody())).status).toBe(200);
            }, 120_000);
          }
        }

        it('closes the connection of a body past the drain cap without hanging, and stays healthy', async () => {
          const { app, post } = await setup();
          // Declared past the default cap (32 MiB): refused at once, nothing read, connection closed.
          const declared = await writeThenRead({
            url: app.url,
            body: bodyOf(2 * MiB),
            declaredLength: 64 * MiB,
          });
          if (declared.status !== undefined) expect(declared.status).toBe(413);
          // Chunked past the cap: read up to it, then the connection is closed.
          const chunked = await writeThenRead({ url: app.url, body: bodyOf(40 * MiB), chunked: true });
          if (chunked.status !== undefined) expect(chunked.status).toBe(413);
          expect((await post(validBody())).status).toBe(200);
        }, 120_000);

        it('answers 413 at once to a declared Content-Length over the limit', async () => {
          const { post } = await setup({ maxBodyBytes: 1024 });
          const res = await post(`{"pad":"${'x'.repeat(2048)}"}`);
          expect(res.status).toBe(413);
        });
      }
      if (bodyParser && !harness.parserKeepsRawBody) {
        // Mounted after the body parser, payhook sees only the parsed value: these rows
        // are served by the parser's rules, as documented, not by payhook's.
        it('cannot see duplicate keys: the parser keeps the last value, which is what gets verified', async () => {
          const { post } = await setup();
          const body = validBody().replace('{"event":', '{"event":"x","event":');
          expect((await post(body)).status).toBe(200);
        });

        it('cannot verify a lexical-only (PHP-encoded) sender: 401', async () => {
          const { post } = await setup();
          const res = await post(phpSignedBody());
          expect(res.status).toBe(401);
        });
      }
      if (bodyParser) {
        it("is bound by the parser's own size limit (413)", async () => {
          const { post } = await setup();
          const res = await post(`{"pad":"${'x'.repeat(PARSER_LIMIT + 1024)}"}`);
          expect(res.status).toBe(413);
        });
      }
    });
  }
  describeFrameworkErrors(name, harness);
}
