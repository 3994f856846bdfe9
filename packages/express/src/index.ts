import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Receiver, readRawBody, runAfterResponse } from '@payhook/core';

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

interface ExpressResponse extends ServerResponse {
  status(code: number): this;
  set(headers: Record<string, string>): this;
  json(body: unknown): this;
}

type Next = (error?: unknown) => void;

/** An Express middleware (typed structurally, so Express 4 and 5 both accept it). */
export type PayhookMiddleware = (req: IncomingMessage, res: ServerResponse, next: Next) => void;

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
  return (incoming, outgoing, next) => {
    const req = incoming as ExpressRequest;
    const res = outgoing as ExpressResponse;
    // Mounted with app.use(path): only the path itself is the webhook, not what lies below it.
    // In a route (app.post(path, ...), router.all(...)) the route has matched already.
    if (req.route === undefined && req.path !== '/' && req.path !== '') {
      next();
      return;
    }
    const consumed = req._body === true || req.readableEnded;
    const raw: unknown = req.rawBody;
    const rawBody = typeof raw === 'string' || raw instanceof Uint8Array ? raw : undefined;
    const header = req.headers['content-type'];
    receiver
      .handle({
        method: req.method ?? 'GET',
        contentType: header,
        remoteAddress: req.socket.remoteAddress,
        clientIp: req.ip,
        forwardedFor: req.headers['x-forwarded-for'],
        rawBody,
        parsedBody: rawBody === undefined && consumed ? req.body : undefined,
        // The drain cap is passed on when the receiver gives one (readRawBody has a default).
        readBody: consumed
          ? undefined
          : (maxBytes: number, maxDrainBytes?: number) => readRawBody(req, maxBytes, maxDrainBytes),
      })
      .then((result) => {
        // Written directly rather than with res.json(): a webhook acknowledgement needs none of
        // its content negotiation and ETag (a SHA-1 of every response).
        res.statusCode = result.status;
        for (const name in result.headers) res.setHeader(name, result.headers[name] as string);
        res.setHeader('content-type', 'application/json; charset=utf-8');
        res.end(JSON.stringify(result.body));
        if (result.afterResponse) runAfterResponse(res, result.afterResponse);
      }, next);
  };
}
