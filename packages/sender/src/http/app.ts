import { isUtf8 } from 'node:buffer';
import { STATUS_CODES } from 'node:http';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { authenticate, type Principal } from '../auth/api-keys.js';
import type { SenderConfig } from '../config.js';
import { DOCS_NAVIGATION } from '../dashboard/docs-theme.js';
import { DOCS_LOGO_SVG, FAVICON_SVG } from '../dashboard/root-routes.js';
import { dashboardRoutes } from '../dashboard/routes.js';
import type { Database } from '../db/database.js';
import type { AttemptFeed } from '../delivery/feed.js';
import { createDeliveryMetrics, type DeliveryMetrics } from '../delivery/metrics.js';
import type { UrlConcurrency } from '../delivery/url-concurrency.js';
import { ApiError } from '../errors.js';
import type { Resolver } from '../net/webhook-url.js';
import { ACT_AS_HEADER, createActAs } from './act-as.js';
import { beneficiaryRoutes } from './beneficiaries.js';
import { customerRoutes } from './customers.js';
import { endpointOperationRoutes } from './endpoint-operations.js';
import { databaseUnavailable, malformedRequest, sendApiError, toApiError } from './errors.js';
import { eventRoutes } from './events.js';
import { healthRoutes } from './health.js';
import { idempotency } from './idempotency.js';
import { inspectionError, inspectJson } from './json-body.js';
import { listenRoutes } from './listen.js';
import { OPENAPI_OPTIONS, tagRoutes } from './openapi.js';
import { paymentRoutes } from './payments.js';
import { traceRequests } from './request-spans.js';
import { sessionRoutes } from './sessions.js';
import { settingsRoutes } from './settings.js';
import { signingSecretRoutes } from './signing-secrets.js';
import { webhookEndpointRoutes } from './webhook-endpoints.js';
import { webhookHealthRoutes } from './webhook-health.js';

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
  /**
   * The attempts the worker of this process records, for the dashboard's live view (default: none
   * arrive; `startSender` passes its worker's).
   */
  feed?: AttemptFeed;
  /**
   * The worker's per-URL concurrency, for each endpoint's page on the dashboard (default: none
   * shown; `startSender` passes its worker's).
   */
  urlConcurrency?: UrlConcurrency;
  /** Fastify's logger option (default: pino at `config.logLevel`, on stdout; `stream` writes elsewhere). */
  logger?: boolean | { level: string; stream?: { write(line: string): void } };
  /**
   * The clock of the webhook endpoints' failure warnings, recoveries and enabling (default: the
   * system's); `startSender` passes its worker's, so tests move both together.
   */
  now?: () => Date;
}

const PUBLIC_PATHS = new Set([
  '/healthz',
  '/openapi.json',
  '/docs',
  '/metrics',
  '/dashboard',
  '/',
  '/favicon.ico',
]);
// The UI's assets, the sandbox pages a payer's browser opens from capture links, and the dashboard
// (which signs in with its own session cookie).
const PUBLIC_PREFIXES = ['/docs/', '/sandbox/pay/', '/sandbox/qr/', '/dashboard/'];

/** The answer to a request whose text holds a NUL character, which no stored text can hold. */
const nulInRequest = () =>
  new ApiError('invalid_request', 'The request holds a NUL character (\\u0000), which no field may contain.');

/**
 * What no stored text can hold in `value` (parsed JSON), in a key or a value: a NUL character, or
 * a lone surrogate (an escape such as `\ud800` that is half of a character: PostgreSQL refuses it
 * in JSON, and text written as UTF-8 would get U+FFFD instead).
 */
function unstorable(value: unknown): 'nul' | 'surrogate' | undefined {
  if (typeof value === 'string')
    return value.includes('\0') ? 'nul' : value.isWellFormed() ? undefined : 'surrogate';
  if (value === null || typeof value !== 'object') return undefined;
  for (const [key, item] of Object.entries(value)) {
    const problem = unstorable(key) ?? unstorable(item);
    if (problem) return problem;
  }
  return undefined;
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
    // The router's own errors (a path that does not decode, an id over 100 characters) are
    // answered in the API's shape, like every other error.
    frameworkErrors: (error, request, reply) => {
      const apiError = toApiError(error);
      request.log.info({ err: error }, 'request refused by the router');
      (reply as FastifyReply).code(apiError.status).send(apiError.toJSON());
    },
    // A request Node's HTTP parser cannot read never reaches Fastify: answered here, same shape.
    clientErrorHandler: (error, socket) => {
      if ((error as { code?: string }).code === 'ECONNRESET' || socket.destroyed) return;
      const apiError = malformedRequest(error);
      const body = JSON.stringify(apiError.toJSON());
      if (socket.writable) {
        socket.write(
          `HTTP/1.1 ${apiError.status} ${STATUS_CODES[apiError.status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
        );
      }
      socket.destroy(error);
    },
  });
  // A close waits for the requests in flight, then for their connections: a client that keeps them
  // alive would hold it for ever (Fastify closes the connections idle when the close begins, not
  // those that go idle after it). They are closed as they go idle; new requests meanwhile are
  // answered 503 with `Connection: close`.
  let closingIdle: NodeJS.Timeout | undefined;
  app.addHook('preClose', (done) => {
    closingIdle = setInterval(() => app.server.closeIdleConnections(), 100);
    closingIdle.unref();
    done();
  });
  app.addHook('onClose', (_instance, done) => {
    clearInterval(closingIdle);
    done();
  });
  // The API speaks JSON only: other bodies are 415, not parsed as text.
  app.removeContentTypeParser('text/plain');
  // A JSON content type with no body is a request without one (what a client that always sets the
  // header sends where the body is optional, as on capture): the route's schema decides, rather
  // than Fastify refusing every empty JSON body.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const bytes = body as Buffer;
    if (bytes.length === 0) {
      done(null, undefined);
      return;
    }
    // Invalid UTF-8 would be read as U+FFFD: a changed value, refused instead.
    if (!isUtf8(bytes)) {
      done(new ApiError('invalid_request', 'The body is not valid UTF-8.'));
      return;
    }
    const text = bytes.toString('utf8');
    parseJson(request, text, (error: Error | null, value?: unknown) => {
      if (error) {
        done(error);
        return;
      }
      // JSON.parse does not recurse; what walks the body afterwards (validation, hashing for the
      // Idempotency-Key, storage) does: depth is checked before any of it, with numbers that
      // parsing changed (an amount beyond 2^53 - 1 would be stored as another amount).
      const inspection = inspectJson(text);
      if (!inspection.ok) done(inspectionError(inspection, value));
      // PostgreSQL text cannot hold NUL or half a character: refused here, not failed on at write.
      // Either can only be written as an escape, so most bodies skip the walk.
      else if (/\\u(?:0000|d[89a-f])/i.test(text)) {
        const problem = unstorable(value);
        if (problem === 'nul') done(nulInRequest());
        else if (problem === 'surrogate') {
          done(
            new ApiError(
              'invalid_request',
              'The body holds a lone surrogate escape (such as \\ud800), which is half of a character.',
            ),
          );
        } else done(null, value);
      } else done(null, value);
    });
  });
  app.decorateRequest('principal', undefined as unknown as Principal);
  const actAs = createActAs(app);
  app.setErrorHandler((error, request, reply) => {
    const apiError = toApiError(error, database.health);
    // An outage is logged once by the database's health, not once per request.
    if (apiError.status >= 500 && apiError.code !== 'database_unavailable')
      request.log.error({ err: error }, 'request failed');
    sendApiError(reply, apiError);
  });
  app.setNotFoundHandler((request, reply) => {
    reply
      .code(404)
      .send(new ApiError('not_found', `No route ${request.method} ${request.url.split('?')[0]}.`).toJSON());
  });
  // First, so that the refusals of the hook below (401, 503) have their spans too.
  traceRequests(app);
  app.addHook('onRequest', async (request) => {
    if (/%00/.test(request.url)) throw nulInRequest();
    const path = request.url.split('?')[0] as string;
    if (PUBLIC_PATHS.has(path) || PUBLIC_PREFIXES.some((prefix) => path.startsWith(prefix))) return;
    // While the database is known to be away, every API route answers at once rather than wait
    // on it (the dashboard answers with a page of its own, `/healthz` and `/metrics` report it).
    if (database.health.state === 'down') throw databaseUnavailable(database.health);
    // The dashboard, calling the API in this process for its signed-in business.
    if (request.headers[ACT_AS_HEADER] !== undefined) {
      const principal = actAs.principalOf(request.headers[ACT_AS_HEADER]);
      if (!principal)
        throw new ApiError('unauthorized', 'Send a valid API key as "Authorization: Bearer <key>".');
      request.principal = principal;
      return;
    }
    const header = request.headers.authorization ?? '';
    const match = /^Bearer\s+(\S+)$/i.exec(header);
    const principal = match ? await authenticate(database.db, config.apiKeys, match[1] as string) : undefined;
    if (!principal) {
      throw new ApiError('unauthorized', 'Send a valid API key as "Authorization: Bearer <key>".');
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
  tagRoutes(app);
  await app.register(swagger, OPENAPI_OPTIONS);
  // payhook's own mark and title, not the UI package's stock ones.
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    logo: { type: 'image/svg+xml', content: Buffer.from(DOCS_LOGO_SVG), href: '/dashboard', target: '_self' },
    theme: {
      // The dashboard's navigation above the UI, with a way back (dashboard/docs-theme.ts).
      ...DOCS_NAVIGATION,
      title: 'payhook sender API',
      favicon: [
        { filename: 'favicon.svg', rel: 'icon', type: 'image/svg+xml', sizes: 'any', content: FAVICON_SVG },
      ],
    },
  });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  await app.register(healthRoutes, { database });
  const metrics = options.metrics ?? createDeliveryMetrics(database);
  const metricsSchema = {
    summary: 'Delivery metrics in the Prometheus text format',
    description:
      'Needs no API key: counters and histograms of delivery attempts, and the queue. No secret is ever in them.',
    operationId: 'getMetrics',
    security: [],
    response: {
      200: {
        description: 'Prometheus text format',
        content: { 'text/plain': { schema: { type: 'string' } } },
      },
    },
  };
  app.get('/metrics', { schema: metricsSchema }, async (_request, reply) => {
    reply.type(metrics.registry.contentType);
    return metrics.registry.metrics();
  });
  await app.register(settingsRoutes, { database, config, resolve: options.resolve });
  await app.register(signingSecretRoutes, { database });
  await app.register(webhookEndpointRoutes, { database, config, resolve: options.resolve, now: options.now });
  await app.register(endpointOperationRoutes, {
    database,
    retentionDays: config.retentionDays,
    ...(options.now ? { now: options.now } : {}),
  });
  await app.register(customerRoutes, { database });
  await app.register(beneficiaryRoutes, { database });
  await app.register(paymentRoutes, { database, config });
  await app.register(sessionRoutes, { database });
  await app.register(eventRoutes, { database, retentionDays: config.retentionDays });
  await app.register(listenRoutes, { database });
  await app.register(webhookHealthRoutes, { database });
  await app.register(dashboardRoutes, {
    database,
    config,
    actAs,
    feed: options.feed,
    urlConcurrency: options.urlConcurrency,
  });
  return app;
}
