import {
  createNodeRequest,
  createWebhookPath,
  errorResult,
  type Receiver,
  type ReceiverResult,
  runAfterResponse,
} from '@payhook/core';
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

const toRequest = createNodeRequest<FastifyRequest>({
  incoming: (request) => request.raw,
  clientIp: (request) => request.ip,
  // The pipeline runs in preParsing: nothing has read the body yet.
  consumed: () => false,
});

function respond(reply: FastifyReply, result: ReceiverResult): void {
  if (result.afterResponse) runAfterResponse(reply.raw, result.afterResponse);
  reply.code(result.status).headers(result.headers).send(result.body);
}

const plugin: FastifyPluginAsync<PayhookFastifyOptions> = async (fastify, options) => {
  const { receiver } = options;
  if (!receiver || typeof receiver.handle !== 'function') {
    throw new TypeError('Invalid receiver: pass the result of createReceiver() as the "receiver" option.');
  }
  const webhook = createWebhookPath(options.path ?? '/webhooks');
  fastify.decorate('payhook', receiver);
  const { logger } = receiver;

  // An encapsulated scope, so that its hook and error handler apply to the webhook route only.
  // The pipeline runs in the route's preParsing stage, before Fastify parses anything: the body is
  // read by the receiver itself (after the address, method and Content-Type checks, as on the
  // other adapters), so every request gets the receiver's own answer, in the receiver's order.
  await fastify.register(async (scope: FastifyInstance) => {
    // What lands here is an error of another plugin's hook before payhook, or a fault of payhook's
    // own handling: answered as the other adapters answer them.
    scope.setErrorHandler((error, _request, reply) => respond(reply, errorResult(error, logger)));
    scope.addHook('preParsing', (request, reply, payload, done) => {
      // `payload` is the request itself, or what an earlier preParsing hook made of it. Answered
      // here, `done` is not called: Fastify neither parses the body nor runs the handler.
      receiver.handle(toRequest(request, payload)).then((result) => respond(reply, result), done);
    });
    const handler = async () => {
      throw new Error('payhook: the webhook route was reached past its preParsing hook');
    };
    for (const url of webhook.urls) scope.route({ method: [...METHODS], url, handler });
  });
};

/**
 * Fastify 5 plugin that receives the service's webhook events through a payhook receiver on one
 * route (`path`, with and without a trailing slash; other methods answer 405). The receiver's
 * pipeline runs in the route's own preParsing hook and reads the raw body itself, so Fastify's
 * content-type parsers, `bodyLimit` and the route's later hooks (preValidation, preHandler) do not
 * apply to it; the receiver's `maxBodyBytes` does. Every other route is untouched. The client
 * address is `request.ip` (Fastify's `trustProxy` applies) unless the receiver has
 * `trustedProxies`. The receiver is available as `fastify.payhook`. The route's error handler
 * answers as the other adapters do: another plugin's hook error keeps its status with payhook's
 * code, and a fault of payhook's own handling is 500 `internal_error`, logged to the receiver's logger.
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

/**
 * The plugin under the name the Express and Koa adapters use, for CommonJS, where the default
 * export is `.default`: `const { payhook } = require('@payhook/fastify')`.
 */
export const payhook = payhookFastify;

export default payhookFastify;
