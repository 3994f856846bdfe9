import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { fileURLToPath } from 'node:url';
import {
  generateSigningKeyPair,
  type PayhookEvent,
  type Receiver,
  type ReceiverOptions,
  signWebhookV1a,
} from '@payhook/core';
import { createTestEvent, signEvent } from '@payhook/core/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { BUSINESS_ID } from '../conformance/adapter-conformance.js';
import { describeSignatureRows } from '../conformance/signature-rows.js';
import { oversizedBody, type RawExchange, writeThenRead } from '../support/raw-http.js';

/** The repository's root directory, with a trailing slash. */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** A runtime's server, started from an example's own files as a user starts it. */
export interface RuntimeServer {
  /** Base URL, such as http://127.0.0.1:PORT */
  url: string;
  /** Everything the server wrote so far (stdout and stderr). */
  output(): string;
  close(): Promise<void>;
}

/** How one runtime's example is started for {@link describeRuntimeConformance}. */
export interface RuntimeHarness {
  /** The runtime, as the example's log lines name it: `[bun] payment.session.succeeded payment=...`. */
  name: string;
  /** Where the example mounts the handler: `/webhooks`, or `/api/webhooks` in the Next.js app. */
  path: string;
  /** Whether the path with a trailing slash reaches the handler (Next.js redirects it instead). */
  trailingSlash: boolean;
  /**
   * Headers the platform's edge writes over whatever the client sent (Next.js behind its proxy:
   * `x-real-ip`); the rows send them with every request, after their own.
   */
  edgeHeaders?: Record<string, string>;
  /**
   * Set where the runtime closes the connection as soon as the answer is sent, body bytes unread
   * (Bun): a client that writes its whole oversized body before reading may then see a reset
   * rather than the 413, whatever the handler drains. The rows then require the 413 or a reset,
   * never another answer, and a healthy server afterwards.
   */
  resetsUnreadBody?: boolean;
  /**
   * Rows that fail on this runtime for a known defect, by name, with the defect: they run as
   * `it.fails`, so the row is still run, and once the defect is fixed it fails as a reminder to
   * remove the entry.
   */
  knownFailures?: Record<string, string>;
  /** Starts the example with these settings (the environment of `examples/shared/web.mjs`). */
  start(env: Record<string, string>): Promise<RuntimeServer>;
}

/** Fails with a clear message when the built packages the examples import are missing. */
export function requireBuilt(): void {
  for (const pkg of ['core', 'web']) {
    if (!existsSync(`${ROOT}packages/${pkg}/dist/index.js`)) {
      throw new Error(
        `packages/${pkg}/dist is missing: the examples run the built packages, run pnpm build first.`,
      );
    }
  }
}

/** Fails with a clear message when a runtime's binary is missing: a missing runtime is never a pass. */
export function requireBinary(path: string, what: string): string {
  if (!existsSync(path)) {
    throw new Error(`${what} is missing at ${path}: run pnpm install (the root devDependencies pin it).`);
  }
  return path;
}

/**
 * Spawns a server process and resolves once its output contains `ready` (a line such as
 * `bun receiver on http://...`); rejects with its output if it exits first or takes longer than
 * `timeoutMs`.
 */
export async function spawnServer(
  command: string,
  args: string[],
  options: { cwd: string; env: Record<string, string>; ready: RegExp; timeoutMs?: number },
): Promise<RuntimeServer & { match: RegExpMatchArray; child: ChildProcess }> {
  // A process group of its own, stopped as a whole: a runtime started through a wrapper (a
  // package's launcher script) would otherwise outlive the wrapper.
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const signal = (name: NodeJS.Signals) => {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, name);
    } catch {
      // The group is gone already.
    }
  };
  let out = '';
  child.stdout?.on('data', (chunk) => {
    out += chunk;
  });
  child.stderr?.on('data', (chunk) => {
    out += chunk;
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const close = async () => {
    if (child.exitCode === null && child.signalCode === null) signal('SIGTERM');
    const timer = setTimeout(() => signal('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
    // Anything the server started and left behind.
    signal('SIGKILL');
  };
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  for (;;) {
    const match = out.match(options.ready);
    if (match) return { url: '', match, child, output: () => out, close };
    if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
      await close();
      throw new Error(
        `${command} ${args.join(' ')} did not start (${child.exitCode ?? child.signalCode ?? 'timed out'}):\n${out}`,
      );
    }
    await wait(20);
  }
}

const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The receiver settings the rows use, as the examples' environment. */
function envOf(options: Partial<ReceiverOptions>): Record<string, string> {
  const env: Record<string, string> = {
    BUSINESS_ID,
    ALLOWED_IPS: (options.allowedIps ?? ['127.0.0.1', '::1']).join(','),
  };
  for (const [key, value] of Object.entries(options)) {
    if (key === 'allowedIps') continue;
    else if (key === 'signingSecrets') env.WEBHOOK_SECRET = (value as string[]).join(',');
    else if (key === 'signingPublicKeys') env.WEBHOOK_PUBLIC_KEY = (value as string[]).join(',');
    else if (key === 'allowUnsigned' && value === true) env.ALLOW_UNSIGNED = '1';
    // The default: the examples set none.
    else if (key === 'signatureToleranceSeconds' && value === 300) continue;
    else throw new Error(`The examples take no setting for ${key}=${JSON.stringify(value)}.`);
  }
  return env;
}

const V1A = generateSigningKeyPair();
const V1A_STRANGER = generateSigningKeyPair();

/** A line the examples log for each event the receiver hands over (examples/shared/web.mjs). */
const handledLine = (runtime: string) => new RegExp(`^\\[${runtime}\\] (\\S+) payment=(\\S+) `, 'gm');

/** The JSON bodies the receiver answers with. */
interface AnswerBody {
  received?: boolean;
  duplicate?: boolean;
  error?: { code: string; message: string; details?: { field?: string }[] };
}

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

/** A raw exchange's body as JSON, de-chunked when the server sent it chunked. */
function rawJson(answer: RawExchange): AnswerBody {
  let body = answer.body;
  if (/chunked/i.test(answer.headers['transfer-encoding'] ?? '')) {
    let out = '';
    for (let at = 0; ; ) {
      const eol = body.indexOf('\r\n', at);
      const size = Number.parseInt(body.slice(at, eol), 16);
      if (!(size > 0)) break;
      out += body.slice(eol + 2, eol + 2 + size);
      at = eol + 2 + size + 2;
    }
    body = out;
  }
  return JSON.parse(body) as AnswerBody;
}

/**
 * The adapter conformance rows that a server in another process can be held to, over real HTTP on
 * loopback: the answers (status, code, headers) of test/conformance/adapter-conformance.ts and
 * the Standard Webhooks rows of test/conformance/signature-rows.ts, run against a runtime's
 * example. The example reports each event its receiver hands over with a log line, which is how
 * the rows count handler runs: exactly once per event, never for a refused one.
 *
 * Servers are started per distinct setting and shared by the rows that use the same one; each row
 * counts only the events it sent itself.
 */
export function describeRuntimeConformance(harness: RuntimeHarness): void {
  describe(`${harness.name} conformance (real runtime, over loopback)`, () => {
    // A row, or an expected failure where the harness names a known defect for it.
    const row = (name: string, body: () => Promise<void>, timeout?: number) =>
      harness.knownFailures?.[name] === undefined ? it(name, body, timeout) : it.fails(name, body, timeout);

    const servers = new Map<string, Promise<RuntimeServer>>();
    afterAll(async () => {
      const started = await Promise.allSettled(servers.values());
      for (const server of started) if (server.status === 'fulfilled') await server.value.close();
    });

    const serverFor = (env: Record<string, string>) => {
      const key = JSON.stringify(env);
      let server = servers.get(key);
      if (!server) {
        server = harness.start(env);
        servers.set(key, server);
      }
      return server;
    };

    async function setup(options: Partial<ReceiverOptions> = {}) {
      const server = await serverFor(envOf(options));
      const url = `${server.url}${harness.path}`;
      // The events this row sent (by payment id), and how many the receiver accepted as new.
      const sent = new Set<string>();
      let accepted = 0;
      const handled = () =>
        [...server.output().matchAll(handledLine(harness.name))]
          .filter((m) => sent.has(m[2] as string))
          .map((m) => ({ event: m[1], data: { id: m[2] } }) as unknown as PayhookEvent);
      const post = async (body: string, headers: Record<string, string> = {}, path = harness.path) => {
        try {
          const id = (JSON.parse(body) as { data?: { id?: unknown } }).data?.id;
          if (typeof id === 'string') sent.add(id);
        } catch {
          // Not JSON: nothing the receiver could hand over.
        }
        const res = await fetch(`${server.url}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers, ...harness.edgeHeaders },
          body,
        });
        const answer = (await res
          .clone()
          .json()
          .catch(() => ({}))) as AnswerBody;
        if (res.status === 200 && answer.received === true && answer.duplicate !== true) accepted++;
        return res;
      };
      // What `receiver.idle()` is to the in-process suite: every accepted event was handed over (its
      // line is in the output); a little longer, so that a second run of one would show too.
      const idle = async () => {
        const deadline = Date.now() + 15_000;
        while (handled().length < accepted && Date.now() < deadline) await wait(10);
        await wait(100);
      };
      const receiver = { idle } as unknown as Receiver;
      const seen = {
        get events() {
          return handled();
        },
      };
      return { server, url, post, idle, receiver, seen, handled };
    }

    const validBody = (name = 'payment.session.succeeded' as const) =>
      JSON.stringify(createTestEvent(name, BUSINESS_ID));
    const json = (res: Response) => res.json() as Promise<AnswerBody>;
    const expectRefusal = async (res: Response, status: number, code: string) => {
      expect(res.status, code).toBe(status);
      expect(res.headers.get('content-type'), code).toMatch(/^application\/json/);
      expect((await json(res)).error?.code).toBe(code);
    };

    row('accepts a valid event with 200 and hands the handler the verified event, once', async () => {
      const { post, idle, handled } = await setup();
      const event = createTestEvent('payment.session.succeeded', BUSINESS_ID);
      const res = await post(JSON.stringify(event));
      expect(res.status).toBe(200);
      expect(await json(res)).toEqual({ received: true });
      await idle();
      expect(handled()).toEqual([{ event: 'payment.session.succeeded', data: { id: event.data.id } }]);
    });

    if (harness.trailingSlash) {
      row('matches the path with and without a trailing slash', async () => {
        const { post } = await setup();
        expect((await post(validBody(), {}, `${harness.path}/`)).status).toBe(200);
      });
    }

    row('acknowledges a duplicate delivery without running the handler again', async () => {
      const { post, idle, handled } = await setup();
      const body = validBody();
      expect((await post(body)).status).toBe(200);
      await idle();
      const again = await post(body);
      expect(again.status).toBe(200);
      expect(await json(again)).toEqual({ received: true, duplicate: true });
      await idle();
      expect(handled()).toHaveLength(1);
    });

    row('runs the handler once for concurrent identical deliveries', async () => {
      const { post, idle, handled } = await setup();
      const body = validBody();
      const responses = await Promise.all(Array.from({ length: 12 }, () => post(body)));
      expect(responses.map((r) => r.status)).toEqual(Array(12).fill(200));
      const bodies = await Promise.all(responses.map(json));
      expect(bodies.filter((b) => b.duplicate !== true)).toHaveLength(1);
      await idle();
      await wait(200);
      expect(handled()).toHaveLength(1);
    });

    row('answers 401 invalid_checksum to a forged checksum, running nothing', async () => {
      const { post, idle, handled } = await setup();
      const other = await post(
        JSON.stringify(createTestEvent('payment.session.succeeded', 'another-business')),
      );
      await expectRefusal(other, 401, 'invalid_checksum');
      const event = createTestEvent('payment.session.succeeded', BUSINESS_ID);
      const rewritten = await post(JSON.stringify({ ...event, data: { ...event.data, amount: 1 } }));
      await expectRefusal(rewritten, 401, 'invalid_checksum');
      await idle();
      expect(handled()).toHaveLength(0);
      // The same event, untouched, is accepted: nothing was recorded for the forgeries.
      expect(await json(await post(JSON.stringify(event)))).toEqual({ received: true });
    });

    row(
      'answers 400 malformed_payload to invalid JSON, missing fields and a checksum that is not 64 hex digits',
      async () => {
        const { post } = await setup();
        const event = createTestEvent('payment.session.succeeded', BUSINESS_ID);
        for (const body of [
          '{"event":',
          '{"event":"payment.session.created","data":{}}',
          '[]',
          JSON.stringify({ ...event, checksum: event.checksum.slice(0, 63) }),
          JSON.stringify({ ...event, checksum: 1234 }),
        ]) {
          await expectRefusal(await post(body), 400, 'malformed_payload');
        }
      },
    );

    row('refuses duplicate keys with 400 and verifies a lexical-only (PHP-encoded) sender', async () => {
      const { post } = await setup();
      await expectRefusal(
        await post(validBody().replace('{"event":', '{"event":"x","event":')),
        400,
        'malformed_payload',
      );
      // Signed over its exact text, escaped "/" and non-ASCII kept as sent.
      const data = '{"description":"Caf\\u00e9 \\/ bar","id":"d3b07384-d9a0-4c4b-8f7e-1c2d3e4f5a6b"}';
      const event = 'payment.session.created';
      const { createHmac } = await import('node:crypto');
      const checksum = createHmac('sha256', BUSINESS_ID).update(`${event}|${data}`).digest('hex');
      const body = `{"event":"${event}","data":${data},"checksum":"${checksum}"}`;
      expect((await post(body)).status).toBe(200);
    });

    row('accepts an unknown event name with 200 and hands it over as unrecognized', async () => {
      const { server, post, idle } = await setup();
      const id = `r_${crypto.randomUUID()}`;
      const res = await post(JSON.stringify(signEvent('payment.refund.created', { id }, BUSINESS_ID)));
      expect(res.status).toBe(200);
      expect(await json(res)).toEqual({ received: true });
      await idle();
      expect(server.output()).toContain(
        `[${harness.name}] unrecognized payment.refund.created: unknown_event`,
      );
    });

    row(
      'answers 415 unsupported_media_type to text/plain, no Content-Type and Content-Types that are not JSON',
      async () => {
        const { post, server } = await setup();
        await expectRefusal(
          await post(validBody(), { 'content-type': 'text/plain' }),
          415,
          'unsupported_media_type',
        );
        for (const contentType of [...NOT_JSON_TYPES, null]) {
          const answer = await writeThenRead({
            url: server.url,
            path: harness.path,
            body: Buffer.from(validBody()),
            contentType,
            headers: { connection: 'close', ...harness.edgeHeaders },
          });
          expect(answer.status, JSON.stringify(contentType)).toBe(415);
          expect(rawJson(answer).error?.code, JSON.stringify(contentType)).toBe('unsupported_media_type');
        }
      },
    );

    row('accepts JSON media types written loosely (case, parameters, a trailing ";")', async () => {
      const { post } = await setup();
      for (const contentType of [
        'Application/JSON',
        'application/json;',
        'application/json; charset=utf-8',
        'application/vnd.payhook+json',
      ]) {
        expect((await post(validBody(), { 'content-type': contentType })).status, contentType).toBe(200);
      }
    });

    row('answers 405 to other methods on the webhook path', async () => {
      const { url } = await setup();
      for (const method of ['GET', 'PUT', 'DELETE']) {
        expect((await fetch(url, { method, headers: { ...harness.edgeHeaders } })).status, method).toBe(405);
      }
    });

    row(
      'answers 413 payload_too_large to a body over the limit (1 MiB), declared or streamed, before it ends',
      async () => {
        const { post, server, idle, handled } = await setup();
        const declared = await post(`{"pad":"${'x'.repeat(1024 * 1024 + 10)}"}`);
        await expectRefusal(declared, 413, 'payload_too_large');
        // Chunked, and never ended: the receiver answers once the limit is passed, not at the end.
        const status = await new Promise<number>((resolve, reject) => {
          const target = new URL(`${server.url}${harness.path}`);
          const req = httpRequest(
            {
              host: target.hostname,
              port: target.port,
              path: target.pathname,
              method: 'POST',
              headers: { 'content-type': 'application/json', ...harness.edgeHeaders },
            },
            (res) => {
              res.resume();
              resolve(res.statusCode ?? 0);
              req.destroy();
            },
          );
          req.on('error', reject);
          req.write(`{"event":"payment.session.created","data":"${'x'.repeat(1024 * 1024 + 8192)}`);
        });
        expect(status).toBe(413);
        const event = createTestEvent('payment.session.succeeded', BUSINESS_ID);
        expect((await post(JSON.stringify(event))).status).toBe(200);
        await idle();
        expect(handled()).toHaveLength(1);
      },
    );

    for (const chunked of [false, true]) {
      row(
        `answers a 2 MiB body (${chunked ? 'chunked' : 'Content-Length'}) with a 413 that a client writing it all first reads`,
        async () => {
          const { server, post } = await setup();
          for (let attempt = 1; attempt <= 5; attempt++) {
            const answer = await writeThenRead({
              url: server.url,
              path: harness.path,
              body: oversizedBody(2 * 1024 * 1024),
              chunked,
              headers: { connection: 'close', ...harness.edgeHeaders },
            });
            const what = `attempt ${attempt}: ${JSON.stringify({ ...answer, body: answer.body.slice(0, 80) })}`;
            if (harness.resetsUnreadBody && answer.status === undefined) {
              expect(answer.writeError, what).toMatch(/EPIPE|ECONNRESET/);
              continue;
            }
            expect(answer.writeError, what).toBeUndefined();
            expect(answer.status, what).toBe(413);
            expect(rawJson(answer).error?.code, what).toBe('payload_too_large');
          }
          expect((await post(validBody())).status).toBe(200);
        },
        20_000,
      );
    }

    row('serves an address inside the allow-list (127.0.0.1 alone)', async () => {
      const { post, idle, handled } = await setup({ allowedIps: ['127.0.0.1'] });
      expect((await post(validBody())).status).toBe(200);
      await idle();
      expect(handled()).toHaveLength(1);
    });

    row(
      'refuses an address outside the allow-list with 403 ip_not_allowed, whatever the Content-Type or X-Forwarded-For',
      async () => {
        const { post, server, idle, handled } = await setup({ allowedIps: ['203.0.113.0/24'] });
        await expectRefusal(await post(validBody()), 403, 'ip_not_allowed');
        // No trusted proxy is configured: a client's own X-Forwarded-For is not believed.
        for (const header of ['x-forwarded-for', 'x-real-ip', 'cf-connecting-ip']) {
          await expectRefusal(await post(validBody(), { [header]: '203.0.113.7' }), 403, 'ip_not_allowed');
        }
        for (const contentType of [';', 'text/plain']) {
          const answer = await writeThenRead({
            url: server.url,
            path: harness.path,
            body: Buffer.from(validBody()),
            contentType,
            headers: { connection: 'close', ...harness.edgeHeaders },
          });
          expect(answer.status, contentType).toBe(403);
          expect(rawJson(answer).error?.code).toBe('ip_not_allowed');
        }
        await idle();
        expect(handled()).toHaveLength(0);
      },
    );

    describe('Standard Webhooks signatures', () => {
      describeSignatureRows(BUSINESS_ID, setup);

      it("verifies Ed25519 (v1a) signatures with the public key, and refuses another key pair's (401 invalid_signature)", async () => {
        const { post, idle, handled } = await setup({ signingPublicKeys: [V1A.publicKey] });
        const event = createTestEvent('payment.session.succeeded', BUSINESS_ID);
        const body = JSON.stringify(event);
        const signed = signWebhookV1a({ id: event.data.id, body, secretKeys: [V1A.secretKey] });
        expect((await post(body, signed)).status).toBe(200);
        const other = JSON.stringify(createTestEvent('payment.session.succeeded', BUSINESS_ID));
        const forged = signWebhookV1a({ id: 'evt_other', body: other, secretKeys: [V1A_STRANGER.secretKey] });
        await expectRefusal(await post(other, forged), 401, 'invalid_signature');
        // The right key over other bytes: the signature covers the body.
        await expectRefusal(await post(other, signed), 401, 'invalid_signature');
        await expectRefusal(await post(other), 401, 'signature_required');
        await idle();
        expect(handled()).toHaveLength(1);
      });
    });
  });
}
