import { KNOWN_EVENTS } from '@payhook/core';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { Principal } from '../auth/api-keys.js';
import { hashKey, principalOfKeyHash } from '../auth/api-keys.js';
import type { SenderConfig } from '../config.js';
import type { Database } from '../db/database.js';
import type { AttemptFeed } from '../delivery/feed.js';
import type { UrlConcurrency } from '../delivery/url-concurrency.js';
import { ApiError } from '../errors.js';
import type { ActAs } from '../http/act-as.js';
import { databaseUnavailable, toApiError } from '../http/errors.js';
import { databaseUnavailablePage, errorPage, signInPage } from './account-views.js';
import { ASSETS } from './assets.js';
import { endpointPages } from './endpoint-routes.js';
import {
  type EventDetail,
  type EventFilters,
  type EventSummary,
  eventPage,
  eventsPage,
} from './events-views.js';
import { choice, decodeForm, type Form, readForm, text } from './form.js';
import type { PageContext } from './layout.js';
import { createLiveStreams, MAX_LIVE_PER_BUSINESS } from './live.js';
import {
  type ApiErrorBody,
  apiRefusal,
  asUtc,
  formRefusal,
  noticeOf,
  sameOrigin,
  sendPage,
} from './pages.js';
import { paymentPages } from './payment-routes.js';
import { createRefreshCache } from './refresh-cache.js';
import { rootRoutes } from './root-routes.js';
import { csrfMatches, type DashboardSession, endSession, readSession, startSession } from './session.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The signed-in dashboard session (dashboard routes only). */
    dashboard: DashboardSession;
  }
}

/** What the dashboard needs of the sender. */
export interface DashboardOptions {
  database: Database;
  config: SenderConfig;
  actAs: ActAs;
  feed?: AttemptFeed | undefined;
  /** The worker's per-URL concurrency, shown on each endpoint's page. */
  urlConcurrency?: UrlConcurrency | undefined;
}

// Nothing from elsewhere, no inline script or style, no framing, forms post here only.
const PAGE_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'same-origin',
};

/**
 * The events filter's type: the API lists whatever type it stored, but the page offers the types
 * the sender makes, and reads its filter strictly (form.ts) against those.
 */
const EVENT_TYPE = choice(Type.Union(KNOWN_EVENTS.map((name) => Type.Literal(name))));

/**
 * The events page's refusal of a type it does not offer, worded as the API's refusal of a filter
 * (naming the field), rather than a list that is empty; undefined for a type it offers.
 */
function refusedType(type: string | undefined): ApiError | undefined {
  const read = type === undefined ? undefined : EVENT_TYPE.read(type);
  if (read === undefined || !('problem' in read)) return undefined;
  return new ApiError('invalid_request', 'The request has invalid fields.', {
    details: [{ field: 'type', message: read.problem }],
  });
}

/**
 * The delivery dashboard at `/dashboard`: server-rendered pages (docs/decisions.md, "The
 * dashboard"), signed in with an API key turned into a session cookie, every form carrying the
 * session's CSRF token. Every read and every action goes through the JSON API's own routes for the
 * signed-in business ({@link ActAs}), so a business sees only its own data and the API's rules
 * (the public-address check, the sandbox's states) apply unchanged.
 */
export const dashboardRoutes: FastifyPluginAsync<DashboardOptions> = async (app, options) => {
  // `/` leads a browser to the dashboard; `/favicon.ico` spares it a 401.
  await app.register(rootRoutes);
  await app.register(async (scope) => dashboard(scope, options), { prefix: '/dashboard' });
};

async function dashboard(app: FastifyInstance, options: DashboardOptions): Promise<void> {
  const { database, config, actAs } = options;
  // Pages, not API operations: kept out of the OpenAPI document.
  app.addHook('onRoute', (route) => {
    route.schema = { ...route.schema, hide: true };
  });
  const live = createLiveStreams(options.feed);
  app.addHook('preClose', async () => live.closeAll());
  app.decorateRequest('dashboard', undefined as unknown as DashboardSession);
  // Pages take forms only: every field is then a string, whatever a client sends (JSON here is 415),
  // decoded strictly (a broken escape or a field given twice is a 400; form.ts).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: 64 * 1024 },
    (_request, body, done) => {
      try {
        done(null, decodeForm(body as string));
      } catch (error) {
        done(error as Error);
      }
    },
  );
  const refreshes = createRefreshCache();
  app.addHook('onSend', async (request, reply, payload) => {
    reply.headers(PAGE_HEADERS);
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
    if (reply.statusCode === 200 && typeof payload === 'string') refreshes.set(request, payload);
  });
  app.addHook('onResponse', async (request) => refreshes.done(request));
  app.setErrorHandler((error, request, reply) => {
    const apiError = toApiError(error, database.health);
    if (apiError.code === 'database_unavailable') {
      reply.header('retry-after', String(apiError.retryAfterSeconds ?? 1));
      return sendPage(reply.code(503), databaseUnavailablePage());
    }
    if (apiError.status >= 500) request.log.error({ err: error }, 'dashboard request failed');
    sendPage(
      reply.code(apiError.status),
      errorPage(
        apiError.status,
        apiError.status < 500 ? 'Refused' : 'Something went wrong',
        apiError.message,
        Boolean(request.dashboard),
        apiError.details,
      ),
    );
  });
  // While the database is away every page says so at once (its stylesheet and script still load).
  app.addHook('onRequest', async (request) => {
    if (database.health.state === 'down' && !request.url.startsWith('/dashboard/assets/'))
      throw databaseUnavailable(database.health);
  });
  app.setNotFoundHandler((request, reply) => {
    sendPage(reply.code(404), errorPage(404, 'Not found', `No page ${request.url.split('?')[0]}.`, false));
  });

  /** Checks the session, and on a POST its CSRF token and origin; otherwise signs in again or refuses. */
  const signedIn = async (request: FastifyRequest, reply: FastifyReply) => {
    const session = await readSession(database, config.apiKeys, request);
    if (!session) {
      if (request.method === 'GET' && !request.url.startsWith('/dashboard/live'))
        return reply.redirect('/dashboard/sign-in', 303);
      return sendPage(
        reply.code(401),
        errorPage(401, 'Signed out', 'Your session ended: sign in again.', false),
      );
    }
    request.dashboard = session;
    const refreshed = await refreshes.get(request);
    if (refreshed !== undefined) return reply.type('text/html; charset=utf-8').send(refreshed);
    if (request.method === 'POST' && !formFromPage(request, session)) return refusedForm(reply);
  };
  const context = (request: FastifyRequest, section: PageContext['section']): PageContext => ({
    principal: request.dashboard.principal,
    csrfToken: request.dashboard.csrfToken,
    section,
  });
  const call = <T>(
    request: FastifyRequest,
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    url: string,
    payload?: unknown,
  ) =>
    actAs.call<T & ApiErrorBody>(request.dashboard.principal, {
      method,
      url,
      ...(payload === undefined ? {} : { payload: payload as object }),
    });

  app.get('/', async (request, reply) => {
    const session = await readSession(database, config.apiKeys, request);
    return reply.redirect(session ? '/dashboard/events' : '/dashboard/sign-in', 303);
  });

  app.get<{ Params: { file: string } }>('/assets/:file', async (request, reply) => {
    const asset = Object.values(ASSETS).find((a) => a.file === request.params.file);
    if (!asset) return sendPage(reply.code(404), errorPage(404, 'Not found', 'No such asset.', false));
    reply.header('cache-control', 'public, max-age=31536000, immutable').type(`${asset.type}; charset=utf-8`);
    return asset.body;
  });

  app.get('/sign-in', async (request, reply) => {
    if (await readSession(database, config.apiKeys, request)) return reply.redirect('/dashboard/events', 303);
    return sendPage(reply, signInPage());
  });

  app.post<{ Body: Form }>('/sign-in', async (request, reply) => {
    if (!sameOrigin(request))
      return sendPage(reply.code(403), signInPage({ error: 'This form was not sent by this dashboard.' }));
    const read = readForm(request.body, { api_key: text() });
    if (!read.ok) return sendPage(reply.code(read.error.status), signInPage({ error: read.error.message }));
    const key = read.values.api_key.trim();
    const keyHash = key.length > 0 && key.length <= 200 ? hashKey(key) : undefined;
    const principal: Principal | undefined = keyHash
      ? await principalOfKeyHash(database.db, config.apiKeys, keyHash)
      : undefined;
    if (!principal || !keyHash) {
      return sendPage(
        reply.code(401),
        signInPage({
          error: 'That API key is not valid here: check it, or make one with payhook keys create.',
        }),
      );
    }
    await startSession(database, request, reply, principal, keyHash);
    return reply.redirect('/dashboard/events', 303);
  });

  app.post('/sign-out', async (request, reply) => {
    const session = await readSession(database, config.apiKeys, request);
    // Signing out needs the form's token too: another site cannot sign a user out.
    if (session && !formFromPage(request, session)) return refusedForm(reply);
    const read = readForm(request.body as Form | undefined, {});
    if (!read.ok) return formRefusal(reply, read.error);
    await endSession(database, request, reply, session);
    return reply.redirect('/dashboard/sign-in', 303);
  });

  app.get<{
    Querystring: EventFilters & { after?: string; before?: string; notice?: string; count?: string };
  }>('/events', { preHandler: signedIn }, async (request, reply) => {
    const q = request.query;
    const filters: EventFilters = {
      type: q.type || undefined,
      delivery_status: q.delivery_status || undefined,
      created_after: q.created_after || undefined,
      created_before: q.created_before || undefined,
    };
    const query = new URLSearchParams({ limit: '25' });
    for (const [key, value] of Object.entries({
      ...filters,
      created_after: asUtc(filters.created_after),
      created_before: asUtc(filters.created_before),
      after: q.after,
      before: q.before,
    })) {
      if (value) query.set(key, value);
    }
    const refused = refusedType(filters.type);
    const answer = refused
      ? undefined
      : await call<{ data: EventSummary[]; pagination: { after: string; before: string } }>(
          request,
          'GET',
          `/events?${query}`,
        );
    const ok = answer?.status === 200;
    return sendPage(
      reply.code(ok ? 200 : 400),
      eventsPage(context(request, '/dashboard/events'), {
        events: ok ? answer.body.data : [],
        pagination: ok ? answer.body.pagination : { after: '', before: '' },
        filters,
        firstPage: !q.after && !q.before,
        notice: noticeOf(q),
        error: ok ? undefined : (refused?.toJSON().error ?? answer?.body.error),
      }),
    );
  });

  app.post<{ Body: Form }>('/events/redeliver', { preHandler: signedIn }, async (request, reply) => {
    const read = readForm(request.body, { since: text() });
    if (!read.ok) return formRefusal(reply, read.error);
    const answer = await call<{ data: { redelivered: number } }>(request, 'POST', '/events/redeliver', {
      since: asUtc(read.values.since),
    });
    if (answer.status !== 202) return apiRefusal(reply, answer.status, answer.body);
    return reply.redirect(
      `/dashboard/events?notice=redelivered_failed&count=${answer.body.data.redelivered}`,
      303,
    );
  });

  app.get<{ Params: { id: string }; Querystring: { notice?: string } }>(
    '/events/:id',
    { preHandler: signedIn },
    async (request, reply) => {
      const answer = await call<{ data: EventDetail }>(
        request,
        'GET',
        `/events/${encodeURIComponent(request.params.id)}`,
      );
      if (answer.status !== 200) return apiRefusal(reply, answer.status, answer.body);
      return sendPage(
        reply,
        eventPage(context(request, '/dashboard/events'), answer.body.data, noticeOf(request.query)),
      );
    },
  );

  app.post<{ Params: { id: string }; Body: Form }>(
    '/events/:id/redeliver',
    { preHandler: signedIn },
    async (request, reply) => {
      const read = readForm(request.body, {});
      if (!read.ok) return formRefusal(reply, read.error);
      const id = encodeURIComponent(request.params.id);
      const answer = await call(request, 'POST', `/events/${id}/redeliver`, {});
      if (answer.status === 202) return reply.redirect(`/dashboard/events/${id}?notice=redelivered`, 303);
      if (answer.body.error?.code === 'no_webhook_urls')
        return reply.redirect(`/dashboard/events/${id}?notice=no_webhook_urls`, 303);
      return apiRefusal(reply, answer.status, answer.body);
    },
  );

  endpointPages(app, { signedIn, call, context }, options.urlConcurrency);
  paymentPages(app, { signedIn, call, context });

  app.get('/live', { preHandler: signedIn }, async (request, reply) => {
    const { principal } = request.dashboard;
    if (live.count(principal) >= MAX_LIVE_PER_BUSINESS) {
      return sendPage(
        reply.code(429),
        errorPage(
          429,
          'Too many live views',
          `At most ${MAX_LIVE_PER_BUSINESS} dashboards of one business stream at once.`,
          true,
        ),
      );
    }
    reply.hijack();
    reply.raw.writeHead(200, {
      ...PAGE_HEADERS,
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      'x-accel-buffering': 'no',
      connection: 'keep-alive',
    });
    live.open(principal, reply.raw);
  });
}

/** True when a POST carries its session's CSRF token and comes from the dashboard's own origin. */
function formFromPage(request: FastifyRequest, session: DashboardSession): boolean {
  return sameOrigin(request) && csrfMatches(session, (request.body as Form | undefined)?._csrf);
}

/** The answer to a form that did not come from a dashboard page. */
function refusedForm(reply: FastifyReply): FastifyReply {
  return sendPage(
    reply.code(403),
    errorPage(
      403,
      'Refused',
      'This form was not sent by this dashboard page (its CSRF token is missing or wrong): reload the page and try again.',
      true,
    ),
  );
}
