import type { IncomingMessage } from 'node:http';
import { type BodyStream, readRawBody } from './read-body.js';
import type { ReceiverRequest } from './types.js';

/**
 * What a framework differs in, read from its own request object `T` (Express's `req`, Koa's
 * `ctx`, Fastify's `request`). Everything else comes from the Node request under it.
 */
export interface NodeRequestMapping<T> {
  /** The Node request under the framework's (`req`, `ctx.req`, `request.raw`). */
  incoming(from: T): IncomingMessage;
  /** The framework's resolution of the client address, which follows its trust-proxy setting. */
  clientIp(from: T): string | undefined;
  /** The raw body a body parser kept (`req.rawBody`, `ctx.request.rawBody`); used if a string or bytes. */
  rawBody?(from: T): unknown;
  /** The body a parser produced, used when the stream was consumed and no raw body was kept. */
  parsedBody?(from: T): unknown;
  /** Whether something already read the body (default: the Node request has ended). */
  consumed?(from: T): boolean;
}

/**
 * Builds the function that turns a framework's request into the {@link ReceiverRequest} that
 * `receiver.handle` takes: method, Content-Type, socket address and X-Forwarded-For from the Node
 * request; the client address and any body a parser left from the framework. A body nobody read
 * is read, when the receiver asks, from the Node request, or from `body` when the framework hands
 * over another stream (Fastify's preParsing `payload`). Made once per adapter; each call makes the
 * request object and its one `readBody` closure, nothing else.
 *
 * @example
 * ```ts
 * const toRequest = createNodeRequest<express.Request>({
 *   incoming: (req) => req,
 *   clientIp: (req) => req.ip,
 *   parsedBody: (req) => req.body,
 * });
 * receiver.handle(toRequest(req)).then((result) => writeResponse(res, result));
 * ```
 */
export function createNodeRequest<T>(
  mapping: NodeRequestMapping<T>,
): (from: T, body?: BodyStream) => ReceiverRequest {
  const { incoming, clientIp, rawBody: keptRawBody, parsedBody, consumed: wasConsumed } = mapping;
  return (from, body) => {
    const req = incoming(from);
    const { headers } = req;
    const consumed = wasConsumed === undefined ? req.readableEnded : wasConsumed(from);
    const raw = keptRawBody === undefined ? undefined : keptRawBody(from);
    const rawBody = typeof raw === 'string' || raw instanceof Uint8Array ? raw : undefined;
    const stream = body ?? req;
    return {
      method: req.method ?? 'GET',
      contentType: headers['content-type'],
      remoteAddress: req.socket.remoteAddress,
      clientIp: clientIp(from),
      forwardedFor: headers['x-forwarded-for'],
      headers,
      rawBody,
      parsedBody:
        rawBody === undefined && consumed && parsedBody !== undefined ? parsedBody(from) : undefined,
      // The drain cap is passed on when the receiver gives one (readRawBody has a default).
      readBody: consumed
        ? undefined
        : (maxBytes: number, maxDrainBytes?: number) => readRawBody(stream, maxBytes, maxDrainBytes),
    };
  };
}
