import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { UrlConcurrency } from '../delivery/url-concurrency.js';
import { RotateBody } from '../http/signing-secrets.js';
import { EndpointStatus, KNOWN_EVENT_TYPES, Scheme } from '../http/webhook-endpoints.js';
import type { SecretView, UrlHealth } from './account-views.js';
import type { ChartData, StatsBucket } from './chart.js';
import {
  type EndpointConcurrency,
  type EndpointForm,
  type EndpointSecretView,
  type EndpointView,
  endpointPage,
  endpointsListPage,
} from './endpoint-views.js';
import {
  choice,
  type Form,
  type FormRules,
  type FormValues,
  integer,
  optional,
  readForm,
  text,
} from './form.js';
import { apiRefusal, asUtc, noticeOf, type PageTools, type Refusal, refusalOf, sendPage } from './pages.js';

interface Stats {
  bucket_seconds: number;
  buckets: StatsBucket[];
}

/** The filter the add form's checkboxes make (the types checked): every event, or those types. */
export function filterOfForm(checked: readonly string[]): string[] {
  return checked.length === 0 || checked.includes('*') ? ['*'] : [...checked];
}

/** The rotation forms' one field: the API's own bounds for the overlap. */
const OverlapSeconds = RotateBody.anyOf[0].properties.overlap_seconds;

/** Each form's fields, read strictly against the API's schemas (form.ts). */
const FORMS = {
  add: { url: text(), description: optional(text()), signature_scheme: choice(Scheme) },
  rotate: { overlap_seconds: integer(OverlapSeconds) },
  status: { status: choice(EndpointStatus) },
  recover: { since: text(), until: optional(text()) },
  none: {},
};

/**
 * The endpoints views: the list (each endpoint, its status and last 24 hours, adding one, the
 * business's secrets) and an endpoint's page (status and warnings, filter, scheme and secrets,
 * charts, enable, disable, recover, rotate, remove), every read and action through the API's
 * `/webhook-endpoints` routes for the signed-in business.
 */
export function endpointPages(
  app: FastifyInstance,
  { signedIn, call, context }: PageTools,
  urlConcurrency?: UrlConcurrency,
): void {
  const list = async (
    request: FastifyRequest,
    reply: FastifyReply,
    extra: { notice?: string | undefined; refusal?: Refusal; form?: EndpointForm } = {},
  ) => {
    const [endpoints, health, secrets] = await Promise.all([
      call<{ data: EndpointView[] }>(request, 'GET', '/webhook-endpoints?limit=100'),
      call<{ data: UrlHealth[] }>(request, 'GET', '/accounts/webhook-health'),
      call<{ data: SecretView[] }>(request, 'GET', '/accounts/signing-secrets'),
    ]);
    if (endpoints.status !== 200) return apiRefusal(reply, endpoints.status, endpoints.body);
    return sendPage(
      reply.code(extra.refusal?.status ?? 200),
      endpointsListPage(context(request, '/dashboard/endpoints'), {
        endpoints: endpoints.body.data,
        health: health.body.data ?? [],
        secrets: secrets.body.data ?? [],
        knownEvents: KNOWN_EVENT_TYPES,
        notice: extra.notice,
        error: extra.refusal?.error,
        ...(extra.form ? { form: extra.form } : {}),
      }),
    );
  };

  const one = async (
    request: FastifyRequest<{ Params: { id: string } }>,
    reply: FastifyReply,
    extra: {
      notice?: string | undefined;
      refusal?: Refusal;
      recover?: { since?: string; until?: string };
    } = {},
  ) => {
    const id = encodeURIComponent(request.params.id);
    const endpoint = await call<{ data: EndpointView }>(request, 'GET', `/webhook-endpoints/${id}`);
    if (endpoint.status !== 200) return apiRefusal(reply, endpoint.status, endpoint.body);
    const [secrets, day, week] = await Promise.all([
      call<{ data: EndpointSecretView[] }>(request, 'GET', `/webhook-endpoints/${id}/signing-secrets`),
      call<{ data: Stats }>(request, 'GET', `/webhook-endpoints/${id}/stats?window=24h`),
      call<{ data: Stats }>(request, 'GET', `/webhook-endpoints/${id}/stats?window=7d`),
    ]);
    const chart = (label: string, stats: Stats | undefined): ChartData => ({
      label,
      bucketSeconds: stats?.bucket_seconds ?? 3600,
      buckets: stats?.buckets ?? [],
    });
    return sendPage(
      reply.code(extra.refusal?.status ?? 200),
      endpointPage(context(request, '/dashboard/endpoints'), {
        endpoint: endpoint.body.data,
        secrets: secrets.body.data ?? [],
        charts: [chart('Last 24 hours', day.body.data), chart('Last 7 days', week.body.data)],
        ...(urlConcurrency ? { concurrency: concurrencyOf(urlConcurrency, endpoint.body.data.id) } : {}),
        notice: extra.notice,
        error: extra.refusal?.error,
        ...(extra.recover ? { recover: extra.recover } : {}),
      }),
    );
  };

  app.get<{ Querystring: { notice?: string } }>('/endpoints', { preHandler: signedIn }, (request, reply) =>
    list(request, reply, { notice: noticeOf(request.query) }),
  );

  app.post<{ Body: Form }>('/endpoints', { preHandler: signedIn }, async (request, reply) => {
    const url = (request.body.url ?? '').trim();
    const description = (request.body.description ?? '').trim();
    const read = readForm(request.body, FORMS.add, { group: 'event:' });
    if (!read.ok) return list(request, reply, { refusal: refusalOf(read.error), form: { url, description } });
    const answer = await call(request, 'POST', '/webhook-endpoints', {
      url,
      ...(description ? { description } : {}),
      enabled_events: filterOfForm(read.group),
      signature_scheme: read.values.signature_scheme,
    });
    if (answer.status !== 201) {
      return list(request, reply, {
        refusal: { status: answer.status, error: answer.body.error },
        form: { url, description },
      });
    }
    return reply.redirect('/dashboard/endpoints?notice=url_added', 303);
  });

  app.post<{ Body: Form }>('/endpoints/rotate-secret', { preHandler: signedIn }, async (request, reply) => {
    const read = readForm(request.body, FORMS.rotate);
    if (!read.ok) return list(request, reply, { refusal: refusalOf(read.error) });
    const answer = await call(request, 'POST', '/accounts/signing-secrets/rotate', {
      overlap_seconds: read.values.overlap_seconds,
    });
    if (answer.status !== 200 && answer.status !== 201)
      return list(request, reply, { refusal: { status: answer.status, error: answer.body.error } });
    return reply.redirect('/dashboard/endpoints?notice=secret_rotated', 303);
  });

  app.get<{ Params: { id: string }; Querystring: { notice?: string; count?: string } }>(
    '/endpoints/:id',
    { preHandler: signedIn },
    (request, reply) => one(request, reply, { notice: noticeOf(request.query) }),
  );

  /**
   * An action of an endpoint's page: its form read against `rules` (a refusal shown on the page),
   * the API asked (`ask`: method, URL, body), and once it answers 200, back to the page `to` names;
   * any other answer is the API's refusal.
   */
  const endpointAction = <R extends FormRules>(
    action: string,
    rules: R,
    ask: (
      id: string,
      values: FormValues<R>,
    ) => [method: 'PATCH' | 'POST' | 'DELETE', url: string, body?: unknown],
    to: (id: string, values: FormValues<R>) => string,
  ) =>
    app.post<{ Params: { id: string }; Body: Form }>(
      `/endpoints/:id/${action}`,
      { preHandler: signedIn },
      async (request, reply) => {
        const id = encodeURIComponent(request.params.id);
        const read = readForm(request.body, rules);
        if (!read.ok) return one(request, reply, { refusal: refusalOf(read.error) });
        const answer = await call(request, ...ask(id, read.values));
        if (answer.status !== 200) return apiRefusal(reply, answer.status, answer.body);
        return reply.redirect(to(id, read.values), 303);
      },
    );

  endpointAction(
    'status',
    FORMS.status,
    (id, { status }) => ['PATCH', `/webhook-endpoints/${id}`, { status }],
    (id, { status }) => `/dashboard/endpoints/${id}?notice=endpoint_${status}`,
  );

  app.post<{ Params: { id: string }; Body: Form }>(
    '/endpoints/:id/recover',
    { preHandler: signedIn },
    async (request, reply) => {
      const id = encodeURIComponent(request.params.id);
      const read = readForm(request.body, FORMS.recover);
      if (!read.ok) return one(request, reply, { refusal: refusalOf(read.error) });
      const { since } = read.values;
      const until = read.values.until || undefined;
      const answer = await call<{ data: { queued: number } }>(
        request,
        'POST',
        `/webhook-endpoints/${id}/recover`,
        {
          since: asUtc(since) ?? '',
          ...(until ? { until: asUtc(until) } : {}),
        },
      );
      if (answer.status === 202)
        return reply.redirect(
          `/dashboard/endpoints/${id}?notice=recovered&count=${answer.body.data.queued}`,
          303,
        );
      if (answer.status === 404) return apiRefusal(reply, answer.status, answer.body);
      return one(request, reply, {
        refusal: { status: answer.status, error: answer.body.error },
        recover: { since, ...(until ? { until } : {}) },
      });
    },
  );

  endpointAction(
    'rotate-secret',
    FORMS.rotate,
    (id, { overlap_seconds }) => [
      'POST',
      `/webhook-endpoints/${id}/signing-secrets/rotate`,
      { overlap_seconds },
    ],
    (id) => `/dashboard/endpoints/${id}?notice=secret_rotated`,
  );

  endpointAction(
    'delete',
    FORMS.none,
    (id) => ['DELETE', `/webhook-endpoints/${id}`],
    () => '/dashboard/endpoints?notice=url_removed',
  );
}

/** What an endpoint's page says of its concurrency: learnt here, or where it starts. */
function concurrencyOf(urlConcurrency: UrlConcurrency, endpointId: string): EndpointConcurrency {
  const { min, max, initial } = urlConcurrency.bounds;
  const limit = urlConcurrency.limitOfEndpoint(endpointId);
  return { limit: limit ?? initial, learnt: limit !== undefined, min, max };
}
