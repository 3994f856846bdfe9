import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  createNodeRequest,
  createWebhookPath,
  errorResult,
  type Receiver,
  writeResponse,
} from '@payhook/core';

/** The parts of an Express 4 or 5 request the middleware reads. */
type ExpressRequest = IncomingMessage & {
  ip?: string | undefined;
  path: string;
  body?: unknown;
  /** Set by a `verify` callback of express.json() that keeps the raw bytes. */
  rawBody?: unknown;
  /** Set by body-parser once it has consumed the stream. */
  _body?: boolean;
  /** Set by Express inside a route handler. */
  route?: unknown;
};

type Next = (error?: unknown) => void;

/** The request handler of {@link payhook} (typed structurally, so Express 4 and 5 both accept it). */
export type PayhookRequestHandler = (req: IncomingMessage, res: ServerResponse, next: Next) => void;

/** The error handler of {@link payhook}: answers an error raised on the webhook path before it. */
export type PayhookErrorHandler = (
  error: unknown,
  req: IncomingMessage,
  res: ServerResponse,
  next: Next,
) => void;

/** What {@link payhook} returns: a request handler and an error handler, mounted together. */
export type PayhookMiddleware = [PayhookRequestHandler, PayhookErrorHandler];

const toRequest = createNodeRequest<ExpressRequest>({
  incoming: (req) => req,
  clientIp: (req) => req.ip,
  rawBody: (req) => req.rawBody,
  parsedBody: (req) => req.body,
  consumed: (req) => req._body === true || req.readableEnded,
});

// Mounted with app.use(path), Express strips the mount point: the webhook is the path itself.
const mountPoint = createWebhookPath('/');

/** Whether the request is the webhook's: in a route (app.post(path, ...)) the route has matched. */
const isWebhook = (req: ExpressRequest) => req.route !== undefined || mountPoint.matches(req.path);

/**
 * Express 4 and 5 middleware that receives the service's webhook events through a payhook
 * receiver: checks the client address, verifies the checksum, acknowledges with 200 at once, and
 * processes each event once after the response.
 *
 * Mount it with `app.use(path, ...)` so that every method on the path reaches it (other methods
 * get 405) and the path matches with and without a trailing slash. Mount it before
 * `express.json()`, or on a router without it, for the full protection of the raw body; after a
 * body parser it verifies the parsed value (RFC 8785 only, duplicate keys unseen).
 *
 * It is two handlers, which Express mounts together: the second answers, in payhook's error
 * shape, an error that Express hands on along the webhook path (a body parser before it refused
 * the body: 413 `payload_too_large`, 400 `malformed_payload`, 415 `unsupported_media_type`), as
 * the Koa and Fastify adapters do. A fault inside payhook's own handling is answered 500
 * `internal_error` and logged to the receiver's logger.
 *
 * The client address is Express's `req.ip` (its `trust proxy` setting applies) unless the
 * receiver has `trustedProxies`.
 *
 * @example
 * ```ts
 * import express from 'express';
 * import { createReceiver } from '@payhook/core';
 * import { payhook } from '@payhook/express';
 *
 * const receiver = createReceiver({ businessIds: [process.env.BUSINESS_ID!], allowedIps: ['203.0.113.10'] });
 * receiver.on('payment.session.succeeded', async (event) => fulfil(event.data));
 *
 * const app = express();
 * app.use('/webhooks', payhook(receiver)); // before app.use(express.json())
 * app.use(express.json());
 * ```
 */
export function payhook(receiver: Receiver): PayhookMiddleware {
  const { logger } = receiver;
  const handle: PayhookRequestHandler = (incoming, res, next) => {
    const req = incoming as ExpressRequest;
    // Below the mount point lies the rest of the app, not the webhook.
    if (!isWebhook(req)) {
      next();
      return;
    }
    receiver.handle(toRequest(req)).then(
      (result) => writeResponse(res, result),
      (error: unknown) => writeResponse(res, errorResult(error, logger)),
    );
  };
  const handleError: PayhookErrorHandler = (error, incoming, res, next) => {
    if (!isWebhook(incoming as ExpressRequest) || res.headersSent) {
      next(error);
      return;
    }
    writeResponse(res, errorResult(error, logger));
  };
  return [handle, handleError];
}
