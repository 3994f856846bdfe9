import { isPayhookError, PayhookError, type Receiver, readRawBody, runAfterResponse } from '@payhook/core';
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
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

  // An encapsulated scope, so that its hook and error handler apply to the webhook route only.
  // The pipeline runs in the route's preParsing stage, before Fastify parses anything: the body is
  // read by the receiver itself (after the address, method and Content-Type checks, as on the
  // other adapters), so every request gets the receiver's own answer, in the receiver's order.
  await fastify.register(async (scope: FastifyInstance) => {
    scope.setErrorHandler((error: { statusCode?: number }, request, reply) => {
      // The receiver answers requests itself, so what lands here is a fault of this server; a
      // client error raised by another plugin's hook keeps its status, in payhook's error shape.
      const status = error.statusCode ?? 500;
      const payhookError = isPayhookError(error)
        ? error
        : status === 413
          ? new PayhookError('payload_too_large', `The body is larger than ${receiver.maxBodyBytes} bytes.`, {
              cause: error,
            })
          : status === 415
            ? new PayhookError(
                'unsupported_media_type',
                'Webhook events are JSON: send Content-Type: application/json.',
                { cause: error },
              )
            : status >= 400 && status < 500
              ? new PayhookError('malformed_payload', 'The request could not be read.', {
                  cause: error,
                  status,
                })
              : new PayhookError('internal_error', 'The webhook could not be handled; send it again.', {
                  cause: error,
                });
      if (payhookError.status >= 500) request.log.error({ err: error }, 'payhook: webhook route failed');
      reply.code(payhookError.status).send(payhookError.toJSON());
    });
    scope.addHook('preParsing', (request, reply, payload, done) => {
      receiver
        .handle({
          method: request.method,
          contentType: request.headers['content-type'],
          remoteAddress: request.socket.remoteAddress,
          clientIp: request.ip,
          forwardedFor: request.headers['x-forwarded-for'],
          // `payload` is the request itself, or what an earlier preParsing hook made of it. The
          // drain cap is passed on when the receiver gives one (readRawBody has a default).
          readBody: (maxBytes: number, maxDrainBytes?: number) =>
            readRawBody(payload, maxBytes, maxDrainBytes),
        })
        .then((result) => {
          if (result.afterResponse) runAfterResponse(reply.raw, result.afterResponse);
          // Answered here, `done` is not called: Fastify neither parses the body nor runs the handler.
          reply.code(result.status).headers(result.headers).send(result.body);
        }, done);
    });
    const handler = async () => {
      throw new Error('payhook: the webhook route was reached past its preParsing hook');
    };
    for (const url of new Set([bare, bare === '/' ? '/' : `${bare}/`])) {
      scope.route({ method: [...METHODS], url, handler });
    }
  });
};

/**
 * Fastify 5 plugin that receives the service's webhook events through a payhook receiver on one
 * route (`path`, with and without a trailing slash; other methods answer 405). The receiver's
 * pipeline runs in the route's own preParsing hook and reads the raw body itself, so Fastify's
 * content-type parsers, `bodyLimit` and the route's later hooks (preValidation, preHandler) do not
 * apply to it; the receiver's `maxBodyBytes` does. Every other route is untouched. The client
 * address is `request.ip` (Fastify's `trustProxy` applies) unless the receiver has
 * `trustedProxies`. The receiver is available as `fastify.payhook`.
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
