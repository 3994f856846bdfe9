import {
  createReceiver,
  type PayhookError,
  type Receiver,
  type ReceiverOptions,
  silentLogger,
  toPayhookError,
} from '@payhook/core';
import { createTestEvent } from '@payhook/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import type { AdapterHarness, RunningApp } from './adapter-conformance.js';

const BUSINESS_ID = '7c1e5a3b-9d24-4f68-b0a2-3e5d7f9c1b46';
const PARSER_LIMIT = 100 * 1024;

/** An error as a framework or its body parser raises it: a message, and the fields it sets. */
const frameworkError = (message: string, fields: Record<string, unknown>) =>
  Object.assign(new Error(message), fields);

/**
 * Errors each framework raises before payhook sees a request, and the code every adapter answers
 * them with. The fields are the ones body-parser (http-errors), Koa's `ctx.throw` and Fastify's
 * `FST_ERR_*` errors carry.
 */
const RAISED: readonly { what: string; error: Error; status: number; code: string }[] = [
  {
    what: "body-parser's entity.too.large",
    error: frameworkError('request entity too large', {
      status: 413,
      statusCode: 413,
      type: 'entity.too.large',
    }),
    status: 413,
    code: 'payload_too_large',
  },
  {
    what: "body-parser's entity.parse.failed",
    error: frameworkError('Unexpected end of JSON input', { status: 400, type: 'entity.parse.failed' }),
    status: 400,
    code: 'malformed_payload',
  },
  {
    what: "body-parser's encoding.unsupported",
    error: frameworkError('unsupported content encoding "br"', { status: 415, type: 'encoding.unsupported' }),
    status: 415,
    code: 'unsupported_media_type',
  },
  {
    what: "Fastify's FST_ERR_CTP_BODY_TOO_LARGE",
    error: frameworkError('Request body is too large', {
      statusCode: 413,
      code: 'FST_ERR_CTP_BODY_TOO_LARGE',
    }),
    status: 413,
    code: 'payload_too_large',
  },
  {
    what: "Koa's ctx.throw(403)",
    error: frameworkError('Forbidden', { status: 403, statusCode: 403, expose: true }),
    status: 403,
    code: 'malformed_payload',
  },
  {
    what: 'a fault without a status',
    error: new Error('cache unreachable'),
    status: 500,
    code: 'internal_error',
  },
];

/** The body every adapter answers `error` with: the same status, code and message everywhere. */
const answerTo = (error: unknown) => (toPayhookError(error) as PayhookError).toJSON();

/**
 * Errors a framework raises on the webhook path, before payhook sees the request or inside its
 * handling, answered alike by every adapter: payhook's error body, the framework's status, the
 * stable code that goes with it (docs/decisions.md, "Framework errors on the webhook path").
 */
export function describeFrameworkErrors(name: string, harness: AdapterHarness): void {
  describe(`${name} framework errors`, () => {
    const running: (RunningApp | Receiver)[] = [];
    afterEach(async () => {
      for (const item of running.splice(0).reverse()) await item.close();
    });

    async function setup(options: { bodyParser?: boolean; failBefore?: Error } = {}) {
      const receiver = createReceiver({
        businessIds: [BUSINESS_ID],
        allowedIps: ['127.0.0.1', '::1'],
        recoveryIntervalMs: 0,
        logger: silentLogger,
      } as ReceiverOptions);
      const app = await harness.start(receiver, {
        bodyParser: options.bodyParser ?? false,
        host: '127.0.0.1',
        parserLimitBytes: PARSER_LIMIT,
        failBefore: options.failBefore,
      });
      running.push(receiver, app);
      const post = (body: string) =>
        fetch(`${app.url}/webhooks`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
        });
      return { receiver, app, post };
    }

    const validBody = () => JSON.stringify(createTestEvent('payment.session.created', BUSINESS_ID));

    for (const { what, error, status, code } of RAISED) {
      it(`answers ${what}, raised before payhook, with ${status} ${code}`, async () => {
        const { post } = await setup({ failBefore: error });
        const res = await post(validBody());
        expect(res.status).toBe(status);
        expect(res.headers.get('content-type')).toMatch(/^application\/json/);
        expect(await res.json()).toEqual(answerTo(error));
      });
    }

    it('answers 500 internal_error when the receiver itself fails, and stays up', async () => {
      const { receiver, post } = await setup();
      const handle = receiver.handle;
      receiver.handle = async () => {
        throw new Error('bug');
      };
      const res = await post(validBody());
      expect(res.status).toBe(500);
      expect(await res.json()).toEqual(answerTo(new Error('bug')));
      receiver.handle = handle;
      expect((await post(validBody())).status).toBe(200);
    });

    if ((harness.modes ?? ['raw', 'parsed']).includes('parsed')) {
      it("answers a body over the parser's limit with 413 payload_too_large, as payhook's own", async () => {
        const { post } = await setup({ bodyParser: true });
        const res = await post(`{"pad":"${'x'.repeat(PARSER_LIMIT + 1024)}"}`);
        expect(res.status).toBe(413);
        expect(await res.json()).toEqual(answerTo({ status: 413 }));
      });

      it('answers JSON the parser cannot read with 400 malformed_payload', async () => {
        const { post } = await setup({ bodyParser: true });
        const res = await post('{"event":');
        expect(res.status).toBe(400);
        expect(await res.json()).toEqual(answerTo({ status: 400 }));
      });
    }
  });
}
