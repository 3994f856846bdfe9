import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  createNodeRequest,
  createWebhookPath,
  errorResult,
  type Receiver,
  type ReceiverResult,
  runAfterResponse,
} from '@payhook/core';

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
  headerSent: boolean;
  set(field: Record<string, string>): void;
}

type KoaNext = () => Promise<unknown>;

/** A Koa middleware (typed structurally, so Koa 2 and 3 both accept it). */
export type PayhookKoaHandler = (ctx: KoaContext, next: KoaNext) => Promise<unknown>;

/** The middleware of {@link payhook}, with the error boundary that goes before a body parser. */
export type PayhookKoaMiddleware = PayhookKoaHandler & {
  /**
   * Koa hands an error back up the chain, so an error a body parser raises before payhook never
   * reaches it. Mount this before the parser to have such errors on the webhook path answered in
   * payhook's error shape, as the Express and Fastify adapters answer them.
   */
  errors: PayhookKoaHandler;
};

/** Options of the Koa middleware. */
export interface PayhookKoaOptions {
  /**
   * The webhook path, matched with and without a trailing slash (default `/webhooks`). `false`
   * handles every request that reaches the middleware, for use inside a router route.
   */
  path?: string | false;
}

const toRequest = createNodeRequest<KoaContext>({
  incoming: (ctx) => ctx.req,
  clientIp: (ctx) => ctx.ip,
  rawBody: (ctx) => ctx.request.rawBody,
  parsedBody: (ctx) => ctx.request.body,
});

// Through Koa's response rather than the Node one, so that middleware before payhook (a logger,
// security headers) still sees and shapes the answer.
function respond(ctx: KoaContext, result: ReceiverResult): void {
  ctx.status = result.status;
  ctx.set(result.headers);
  ctx.body = result.body;
  if (result.afterResponse) runAfterResponse(ctx.res, result.afterResponse);
}

/**
 * Koa 2 and 3 middleware that receives the service's webhook events through a payhook receiver:
 * checks the client address (`ctx.ip`, so Koa's `proxy` setting applies, unless the receiver has
 * `trustedProxies`), verifies the checksum, acknowledges with 200 at once, and processes each
 * event once after the response.
 *
 * Works with or without `@koa/bodyparser` before it: the parser keeps `ctx.request.rawBody`, which
 * payhook verifies; without a parser it reads the body itself, up to the receiver's limit. A fault
 * inside payhook's own handling is answered 500 `internal_error` and logged to the receiver's
 * logger. With a parser before it, mount `errors` before the parser so that its refusals (413
 * `payload_too_large`, 400 `malformed_payload`) are answered in payhook's error shape too.
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
  const webhook = path === false ? undefined : createWebhookPath(path);
  const { logger } = receiver;
  const middleware: PayhookKoaHandler = (ctx, next) => {
    if (webhook !== undefined && !webhook.matches(ctx.path)) return next();
    return receiver.handle(toRequest(ctx)).then(
      (result) => respond(ctx, result),
      (error: unknown) => respond(ctx, errorResult(error, logger)),
    );
  };
  const errors: PayhookKoaHandler = (ctx, next) => {
    if (webhook !== undefined && !webhook.matches(ctx.path)) return next();
    return next().then(undefined, (error: unknown) => {
      if (ctx.headerSent) throw error;
      respond(ctx, errorResult(error, logger));
    });
  };
  return Object.assign(middleware, { errors });
}
