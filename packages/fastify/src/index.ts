import { PayhookError, type Receiver, runAfterResponse } from '@payhook/core';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

/** Options of the Fastify plugin. */
export interface PayhookFastifyOptions {
  /** The receiver that verifies and processes events. */
  receiver: Receiver;
  /** The webhook path, matched with and without a trailing slash (default `/webhooks`). */
  path?: string;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The payhook receiver registered by `@payhook/fastify`. */
    payhook: Receiver;
  }
}

const METHODS = ['DELETE', 'GET', 'OPTIONS', 'PATCH', 'POST', 'PUT'] as const;

const plugin: FastifyPluginAsync<PayhookFastifyOptions> = async (fastify, options) => {
  const { receiver } = options;
  if (!receiver || typeof receiver.handle !== 'function') {
    throw new TypeError('Invalid receiver: pass the result of createReceiver() as the "receiver" option.');
  }
  const path = options.path ?? '/webhooks';
  if (typeof path !== 'string' || !path.startsWith('/')) {
    throw new TypeError(`Invalid path: ${String(path)} (expected a path starting with "/").`);
  }
  const bare = path.replace(/\/+$/, '') || '/';
  fastify.decorate('payhook', receiver);

  // An encapsulated scope: its content-type parser keeps the raw bytes for the webhook route only,
  // and every other route keeps Fastify's own parsers.
  await fastify.register(async (scope: FastifyInstance) => {
    scope.removeAllContentTypeParsers();
    const keepRaw = { parseAs: 'buffer', bodyLimit: receiver.maxBodyBytes } as const;
    const raw = (_req: FastifyRequest, body: Buffer, done: (error: null, body: Buffer) => void) =>
      done(null, body);
    // JSON by name as well as the catch-all: Fastify caches the parser it finds for a content
    // type by name, but looks the catch-all up afresh (parsing the header) on every request.
    scope.addContentTypeParser('application/json', keepRaw, raw);
    scope.addContentTypeParser('*', keepRaw, raw);
    scope.setErrorHandler((error: { statusCode?: number; code?: string }, request, reply) => {
      // Fastify's own refusals on this route (body too large, for instance) speak payhook's error
      // shape; anything else is a fault of this server, not of the request.
      const status = error.statusCode ?? 500;
      const payhookError =
        status === 413
          ? new PayhookError('payload_too_large', `The body is larger than ${receiver.maxBodyBytes} bytes.`, {
              cause: error,
            })
          : status >= 400 && status < 500
            ? new PayhookError('malformed_payload', 'The request body could not be read.', {
                cause: error,
                status,
              })
            : new PayhookError('internal_error', 'The webhook could not be handled; send it again.', {
                cause: error,
              });
      if (payhookError.status >= 500) request.log.error({ err: error }, 'payhook: webhook route failed');
      reply.code(payhookError.status).send(payhookError.toJSON());
    });
    const handler = async (request: FastifyRequest, reply: FastifyReply) => {
      const result = await receiver.handle({
        method: request.method,
        contentType: request.headers['content-type'],
        remoteAddress: request.socket.remoteAddress,
        clientIp: request.ip,
        forwardedFor: request.headers['x-forwarded-for'],
        // A request without a body never reaches the content-type parser: an empty body, then.
        rawBody: request.body instanceof Uint8Array ? request.body : '',
      });
      if (result.afterResponse) runAfterResponse(reply.raw, result.afterResponse);
      return reply.code(result.status).headers(result.headers).send(result.body);
    };
    for (const url of new Set([bare, bare === '/' ? '/' : `${bare}/`])) {
      scope.route({ method: [...METHODS], url, handler });
    }
  });
};

/**
 * Fastify 5 plugin that receives the service's webhook events through a payhook receiver on one
 * route (`path`, with and without a trailing slash; other methods answer 405). The route keeps
 * the raw body for verification through its own encapsulated content-type parser; every other
 * route is untouched. The client address is `request.ip` (Fastify's `trustProxy` applies) unless
 * the receiver has `trustedProxies`. The receiver is available as `fastify.payhook`.
 *
 * @example
 * ```ts
 * import Fastify from 'fastify';
 * import { createReceiver } from '@payhook/core';
 * import payhook from '@payhook/fastify';
 *
 * const receiver = createReceiver({ businessIds: [process.env.BUSINESS_ID!], allowedIps: ['203.0.113.10'] });
 * receiver.on('payment.session.created', async (event) => recordSession(event.data));
 *
 * const app = Fastify();
 * await app.register(payhook, { receiver, path: '/webhooks' });
 * ```
 */
export const payhookFastify = fp(plugin, { fastify: '5.x', name: '@payhook/fastify' });

export default payhookFastify;
