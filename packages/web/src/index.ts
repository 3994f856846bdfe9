import {
  createWebhookPath,
  errorResult,
  isPayhookError,
  PayhookError,
  type Receiver,
  type ReceiverRequest,
  type ReceiverResult,
} from '@payhook/core';
import { cloudflareAddress, inspectPlatform, type WaitUntil } from './platform.js';
import { readWebBody } from './read-body.js';

export type { WaitUntil } from './platform.js';

/**
 * When an accepted event's handlers run, relative to the answer:
 * - `after-response` (default): the 200 goes out at once and the handlers run after it, under
 *   the platform's `waitUntil` when there is one, else in the receiver's in-process queue;
 * - `before-response`: the handlers run to the end first; the answer is 200 once they succeeded,
 *   and 500 (`handler_failed` or `handler_timeout`) once they failed, so the sender retries.
 */
export type Processing = 'after-response' | 'before-response';

/** Options of {@link createWebHandler}. */
export interface WebHandlerOptions {
  /**
   * The webhook path (matched with and without a trailing slash); other paths are answered 404
   * `not_found`. Default: every path is the webhook's, for a router that matched it already
   * (a Next.js route file, a Hono route).
   */
  path?: string;
  /**
   * Keeps the instance alive while an accepted event's handlers run after the 200: Next.js's
   * `after`, Vercel's `waitUntil` from `@vercel/functions`, or any function that takes a
   * promise. Default: the `waitUntil` the platform passes (a Worker's `ctx`, Hono's
   * `c.executionCtx`); without one, the handlers run in the receiver's queue as on any
   * long-lived server.
   */
  waitUntil?: WaitUntil;
  /** When the handlers run: after the answer (default) or before it; see {@link Processing}. */
  processing?: Processing;
  /**
   * The client address of a request, where the platform gives none the handler can find (Next.js,
   * Vercel, Netlify: usually a header their edge sets, such as `x-real-ip`). Called with the
   * request and the arguments the handler got after it. Its answer replaces what the handler
   * would find; `undefined` means unknown. The receiver's `trustedProxies` then applies to it as to
   * a socket's address.
   */
  getClientAddress?: (request: Request, ...context: unknown[]) => string | undefined;
  /**
   * Read the client address from `CF-Connecting-IP`, which Cloudflare's edge sets. Default: only
   * on the Workers runtime (the request has `request.cf`, which no client can set). Set `true`
   * only for a server that takes no connection except through Cloudflare (a Tunnel, or a firewall
   * that admits Cloudflare's ranges only): anyone who reaches the server directly can send the
   * header. `false` never reads it.
   */
  trustCloudflare?: boolean;
}

/**
 * A Web-standard request handler: a `Request` in, a `Response` out. The arguments after the
 * request are the platform's, passed on as they come (`server` on Bun, `info` on Deno, `env` and
 * `ctx` on Workers, the route context in Next.js, or a Hono context `c`).
 */
export type WebHandler = (request: Request, ...context: unknown[]) => Promise<Response>;

const JSON_TYPE = 'application/json; charset=utf-8';

function respond(result: ReceiverResult): Response {
  return new Response(JSON.stringify(result.body), {
    status: result.status,
    headers: { ...result.headers, 'content-type': JSON_TYPE },
  });
}

/** The path of an absolute URL, without reading the rest (query, fragment). */
function pathnameOf(url: string): string {
  const start = url.indexOf('/', url.indexOf('//') + 2);
  if (start === -1) return '/';
  const end = url.slice(start).search(/[?#]/);
  return end === -1 ? url.slice(start) : url.slice(start, start + end);
}

function refusal(error: PayhookError): ReceiverResult {
  return { status: error.status, body: error.toJSON() as unknown as Record<string, unknown>, headers: {} };
}

/** The answer of `before-response` processing once the handlers failed. */
function failedResult(error: unknown): ReceiverResult {
  const timedOut = isPayhookError(error) && error.code === 'handler_timeout';
  return refusal(
    timedOut
      ? new PayhookError(
          'handler_timeout',
          "The event's handlers did not finish in time; it was not processed. Send it again.",
        )
      : new PayhookError(
          'handler_failed',
          "The event's handlers failed; it was not processed. Send it again.",
        ),
  );
}

/**
 * Creates a Web-standard handler (`Request` in, `Response` out) that receives the service's
 * webhook events through a payhook receiver: checks the client address, verifies the signature
 * and checksum over the raw body it reads itself (once, refusing an oversized body while it
 * streams), and answers with the same statuses, codes and headers as the Express, Koa and
 * Fastify adapters. An accepted event is acknowledged with 200 at once and its handlers run
 * after the answer: under the platform's `waitUntil` where there is one (a Worker's `ctx`, or the
 * `waitUntil` option: Next.js's `after`, Vercel's `waitUntil`), else in the receiver's queue. With
 * `processing: 'before-response'` they run before the answer instead.
 *
 * The arguments after the request are read for what they tell: `waitUntil` (Workers' `ctx`,
 * Hono's `c.executionCtx`) and the client address (Bun's `server.requestIP`, Deno's
 * `info.remoteAddr`, `@hono/node-server`'s socket, `CF-Connecting-IP` on Workers, or the
 * `getClientAddress` option). With an allow-list and no address known, a request is refused
 * with 500 `client_address_unknown`, whose message names the option to set.
 *
 * @example
 * ```ts
 * import { createReceiver } from '@payhook/core';
 * import { createWebHandler } from '@payhook/web';
 *
 * const receiver = createReceiver({ businessIds: [BUSINESS_ID], signingSecrets: [WEBHOOK_SECRET], allowedIps: ALLOWED_IPS });
 * receiver.on('payment.session.succeeded', (event) => markOrderPaid(event.data));
 * const handler = createWebHandler(receiver, { path: '/webhooks' });
 *
 * export const POST = createWebHandler(receiver);          // Next.js: app/webhooks/route.ts
 * app.all('/webhooks', (c) => handler(c.req.raw, c));      // Hono
 * Bun.serve({ fetch: handler });                           // Bun
 * Deno.serve(handler);                                     // Deno
 * export default { fetch: handler };                       // Cloudflare Workers
 * ```
 */
export function createWebHandler(receiver: Receiver, options: WebHandlerOptions = {}): WebHandler {
  const { logger } = receiver;
  const webhookPath = options.path === undefined ? undefined : createWebhookPath(options.path);
  const processing = options.processing ?? 'after-response';
  if (processing !== 'after-response' && processing !== 'before-response') {
    throw new TypeError(
      `Invalid processing: ${String(processing)} (expected "after-response" or "before-response").`,
    );
  }
  for (const name of ['waitUntil', 'getClientAddress'] as const) {
    if (options[name] !== undefined && typeof options[name] !== 'function') {
      throw new TypeError(`Invalid ${name}: ${String(options[name])} (expected a function).`);
    }
  }
  const { getClientAddress, trustCloudflare } = options;
  const notFound = webhookPath
    ? refusal(new PayhookError('not_found', `No webhook here: the webhook path is ${webhookPath.path}.`))
    : undefined;

  const clientAddress = (request: Request, context: unknown[], platformAddress: () => string | undefined) => {
    if (getClientAddress) return getClientAddress(request, ...context)?.trim() || undefined;
    const cloudflare = cloudflareAddress(request, trustCloudflare);
    if (cloudflare !== undefined || trustCloudflare === true) return cloudflare;
    return platformAddress();
  };

  return async (request, ...context) => {
    if (webhookPath && notFound && !webhookPath.matches(pathnameOf(request.url))) return respond(notFound);
    let platform: ReturnType<typeof inspectPlatform> | undefined;
    const facts = () => {
      platform ??= inspectPlatform(request, context);
      return platform;
    };
    let result: ReceiverResult;
    try {
      const headers: Record<string, string> = {};
      request.headers.forEach((value, name) => {
        headers[name] = value;
      });
      const received: ReceiverRequest = {
        method: request.method,
        contentType: headers['content-type'],
        remoteAddress: clientAddress(request, context, () => facts().address),
        headers,
        forwardedFor: headers['x-forwarded-for'],
        readBody: (maxBytes, maxDrainBytes) =>
          readWebBody(request, maxBytes, maxDrainBytes ?? receiver.maxDrainBytes, facts().socket),
      };
      result = await receiver.handle(received);
    } catch (error) {
      result = errorResult(error, logger);
    }
    const { afterResponse, processed } = result;
    if (afterResponse === undefined) return respond(result);
    if (processing === 'before-response') {
      afterResponse();
      const outcome = await processed?.();
      return respond(outcome?.outcome === 'failed' ? failedResult(outcome.error) : result);
    }
    const waitUntil = options.waitUntil ?? facts().waitUntil;
    if (waitUntil !== undefined && processed !== undefined) {
      afterResponse();
      try {
        waitUntil(processed());
      } catch (error) {
        // The event is running in the queue all the same; only the platform's hold on it is lost.
        logger.error({ err: error }, 'payhook: waitUntil threw; the handlers run without it');
      }
    } else {
      queueMicrotask(afterResponse);
    }
    return respond(result);
  };
}

/**
 * The answer, in payhook's error shape, to an error raised on the webhook route before the
 * handler ran (a middleware before it, a framework's hook): the status and stable code the
 * Express, Koa and Fastify adapters answer it with (413 `payload_too_large`, 400
 * `malformed_payload`, 415 `unsupported_media_type`, else 500 `internal_error`, logged to the
 * receiver's logger).
 *
 * @example
 * ```ts
 * const app = new Hono();
 * app.all('/webhooks', (c) => handler(c.req.raw, c));
 * app.onError((error, c) =>
 *   c.req.path.startsWith('/webhooks') ? webhookErrorResponse(receiver, error) : c.text('Internal Server Error', 500),
 * );
 * ```
 */
export function webhookErrorResponse(receiver: Receiver, error: unknown): Response {
  return respond(errorResult(error, receiver.logger));
}
