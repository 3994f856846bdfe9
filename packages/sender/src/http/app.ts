import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import Fastify, { type FastifyInstance } from 'fastify';
import { authenticate, type Principal } from '../auth/api-keys.js';
import type { SenderConfig } from '../config.js';
import type { Database } from '../db/database.js';
import { createDeliveryMetrics, type DeliveryMetrics } from '../delivery/metrics.js';
import type { Resolver } from '../net/webhook-url.js';
import { beneficiaryRoutes } from './beneficiaries.js';
import { customerRoutes } from './customers.js';
import { ApiError, toApiError } from './errors.js';
import { eventRoutes } from './events.js';
import { idempotency } from './idempotency.js';
import { paymentRoutes } from './payments.js';
import { sessionRoutes } from './sessions.js';
import { settingsRoutes } from './settings.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The business and mode of the request's API key (authenticated routes only). */
    principal: Principal;
  }
}

/** What the HTTP service needs. */
export interface AppOptions {
  database: Database;
  config: SenderConfig;
  /** Resolves webhook host names (injectable for tests). */
  resolve?: Resolver;
  /**
   * The delivery metrics `/metrics` exposes; give the worker's, so its attempt counters show
   * (default: new metrics, whose queue gauges still read the shared database).
   */
  metrics?: DeliveryMetrics;
  /** Fastify's logger option (default: pino at `config.logLevel`). */
  logger?: boolean | { level: string };
}

const PUBLIC_PATHS = new Set(['/healthz', '/openapi.json', '/docs', '/metrics']);
// The UI's assets, and the sandbox pages a payer's browser opens from capture links.
const PUBLIC_PREFIXES = ['/docs/', '/sandbox/pay/', '/sandbox/qr/'];

/** The answer to a request whose text holds a NUL character, which no stored text can hold. */
const nulInRequest = () =>
  new ApiError(
    400,
    'invalid_request',
    'The request holds a NUL character (\\u0000), which no field may contain.',
  );

/** True if `value` (parsed JSON) holds a string, key or value, with a NUL character. */
function holdsNul(value: unknown): boolean {
  if (typeof value === 'string') return value.includes('\0');
  if (value === null || typeof value !== 'object') return false;
  for (const [key, item] of Object.entries(value)) if (key.includes('\0') || holdsNul(item)) return true;
  return false;
}

/**
 * Builds the sender's HTTP service: JSON Schema validation without type coercion of bodies, one
 * error handler for every error (Fastify's own 404, 413, 415 and schema failures included), and
 * bearer-key authentication on every route but the public ones.
 *
 * @example
 * ```ts
 * const app = await buildApp({ database: await openDatabase({ dataDir }), config: loadConfig(process.env) });
 * await app.listen({ port: 8080 });
 * ```
 */
export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const { database, config } = options;
  const app = Fastify({
    logger: options.logger ?? { level: config.logLevel },
    bodyLimit: 1024 * 1024,
    // The spec writes `/customers/`; both spellings of every path are served.
    routerOptions: { ignoreTrailingSlash: true },
    ajv: { customOptions: { coerceTypes: false, allErrors: true, removeAdditional: false } },
  });
  // The API speaks JSON only: other bodies are 415, not parsed as text.
  app.removeContentTypeParser('text/plain');
  // A JSON content type with no body is a request without one (what a client that always sets the
  // header sends where the body is optional, as on capture): the route's schema decides, rather
  // than Fastify refusing every empty JSON body.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = body.toString();
    if (text === '') {
      done(null, undefined);
      return;
    }
    parseJson(request, text, (error: Error | null, value?: unknown) => {
      // PostgreSQL text cannot hold NUL: a string with one is refused here, not failed on at write.
      if (!error && /\\u0000/i.test(text) && holdsNul(value)) done(nulInRequest());
      else done(error, value);
    });
  });
  app.decorateRequest('principal', undefined as unknown as Principal);
  app.setErrorHandler((error, request, reply) => {
    const apiError = toApiError(error);
    if (apiError.status >= 500) request.log.error({ err: error }, 'request failed');
    reply.code(apiError.status).send(apiError.toJSON());
  });
  app.setNotFoundHandler((request, reply) => {
    reply
      .code(404)
      .send(
        new ApiError(404, 'not_found', `No route ${request.method} ${request.url.split('?')[0]}.`).toJSON(),
      );
  });
  app.addHook('onRequest', async (request) => {
    if (/%00/.test(request.url)) throw nulInRequest();
    const path = request.url.split('?')[0] as string;
    if (PUBLIC_PATHS.has(path) || PUBLIC_PREFIXES.some((prefix) => path.startsWith(prefix))) return;
    const header = request.headers.authorization ?? '';
    const match = /^Bearer\s+(\S+)$/i.exec(header);
    const principal = match ? await authenticate(database.db, config.apiKeys, match[1] as string) : undefined;
    if (!principal) {
      throw new ApiError(401, 'unauthorized', 'Send a valid API key as "Authorization: Bearer <key>".');
    }
    request.principal = principal;
  });
  if (config.allowPrivateWebhooks) {
    app.log.warn(
      'PAYHOOK_ALLOW_PRIVATE_WEBHOOKS is on: webhook URLs may point at private addresses (local development only)',
    );
  }

  idempotency(app, database);
  // OpenAPI 3.1 generated from the route schemas (the wire shapes come from @payhook/core), and
  // rendered at /docs with the assets the UI package ships (nothing fetched from elsewhere).
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'payhook reference sender',
        version: '0.1.0',
        description:
          'Payment sessions, payments, customers, beneficiaries and settings; events are delivered to every registered webhook URL.',
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearer: [] }],
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  app.get('/healthz', async () => ({ ok: true, storage: database.kind }));
  const metrics = options.metrics ?? createDeliveryMetrics(database);
  app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
    reply.type(metrics.registry.contentType);
    return metrics.registry.metrics();
  });
  await app.register(settingsRoutes, { database, config, resolve: options.resolve });
  await app.register(customerRoutes, { database });
  await app.register(beneficiaryRoutes, { database });
  await app.register(paymentRoutes, { database, config });
  await app.register(sessionRoutes, { database });
  await app.register(eventRoutes, { database });
  return app;
}
