import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Receiver, readRawBody, runAfterResponse } from '@payhook/core';

/** The parts of a Koa 2 or 3 context the middleware reads and writes. */
interface KoaContext {
  method: string;
  path: string;
  ip: string;
  req: IncomingMessage;
  res: ServerResponse;
  request: { body?: unknown; rawBody?: unknown };
  status: number;
  body: unknown;
  set(field: Record<string, string>): void;
}

/** A Koa middleware (typed structurally, so Koa 2 and 3 both accept it). */
export type PayhookKoaMiddleware = (ctx: KoaContext, next: () => Promise<unknown>) => Promise<void>;

/** Options of the Koa middleware. */
export interface PayhookKoaOptions {
  /**
   * The webhook path, matched with and without a trailing slash (default `/webhooks`). `false`
   * handles every request that reaches the middleware, for use inside a router route.
   */
  path?: string | false;
}

/**
 * Koa 2 and 3 middleware that receives the service's webhook events through a payhook receiver:
 * checks the client address (`ctx.ip`, so Koa's `proxy` setting applies, unless the receiver has
 * `trustedProxies`), verifies the checksum, acknowledges with 200 at once, and processes each
 * event once after the response.
 *
 * Works with or without `@koa/bodyparser` before it: the parser keeps `ctx.request.rawBody`, which
 * payhook verifies; without a parser it reads the body itself, up to the receiver's limit.
 *
 * @example
 * ```ts
 * import Koa from 'koa';
 * import { createReceiver } from '@payhook/core';
 * import { payhook } from '@payhook/koa';
 *
 * const receiver = createReceiver({ businessIds: [process.env.BUSINESS_ID!], allowedIps: ['203.0.113.10'] });
 * receiver.on('payment.session.failed', async (event) => notifyCustomer(event.data.customer.email));
 *
 * const app = new Koa();
 * app.use(payhook(receiver, { path: '/webhooks' }));
 * ```
 */
export function payhook(receiver: Receiver, options: PayhookKoaOptions = {}): PayhookKoaMiddleware {
  const path = options.path === undefined ? '/webhooks' : options.path;
  if (path !== false && (typeof path !== 'string' || !path.startsWith('/'))) {
    throw new TypeError(`Invalid path: ${String(path)} (expected a path starting with "/", or false).`);
  }
  const bare = path === false ? undefined : path.replace(/\/+$/, '') || '/';
  return async (ctx, next) => {
    if (bare !== undefined && ctx.path !== bare && ctx.path !== `${bare}/`) {
      await next();
      return;
    }
    const raw = ctx.request.rawBody;
    const rawBody = typeof raw === 'string' || raw instanceof Uint8Array ? raw : undefined;
    const consumed = ctx.req.readableEnded;
    const result = await receiver.handle({
      method: ctx.method,
      contentType: ctx.req.headers['content-type'],
      remoteAddress: ctx.req.socket.remoteAddress,
      clientIp: ctx.ip,
      forwardedFor: ctx.req.headers['x-forwarded-for'],
      rawBody,
      parsedBody: rawBody === undefined && consumed ? ctx.request.body : undefined,
      // The drain cap is passed on when the receiver gives one (readRawBody has a default).
      readBody: consumed
        ? undefined
        : (maxBytes: number, maxDrainBytes?: number) => readRawBody(ctx.req, maxBytes, maxDrainBytes),
    });
    ctx.status = result.status;
    ctx.set(result.headers);
    ctx.body = result.body;
    if (result.afterResponse) runAfterResponse(ctx.res, result.afterResponse);
  };
}
