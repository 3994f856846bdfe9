import type { FastifyPluginAsync } from 'fastify';
import { type Static, Type } from 'typebox';
import type { SenderConfig } from '../config.js';
import type { Database } from '../db/database.js';
import { normalizeFilter } from '../endpoints/filter.js';
import { createEndpoint, deleteEndpoint, updateEndpoint } from '../endpoints/lifecycle.js';
import {
  type EndpointRow,
  getEndpoint,
  MAX_ENDPOINTS,
  selectEndpoints,
  toEndpointView,
} from '../endpoints/store.js';
import { ApiError } from '../errors.js';
import { checkWebhookUrl, type Resolver } from '../net/webhook-url.js';
import { EndpointFailure, withFailures } from './endpoint-operations.js';
import { idempotentWrite } from './idempotency.js';
import { WEBHOOKS } from './openapi.js';
import { listPage, listSchema, microsColumn, type PageQuery } from './pagination.js';
import { endpointSecretRoutes } from './webhook-endpoint-secrets.js';

/** The event types a filter may name: those of the OpenAPI document's `webhooks` section. */
export const KNOWN_EVENT_TYPES: readonly string[] = Object.keys(WEBHOOKS);

const Url = Type.String({
  minLength: 1,
  maxLength: 2048,
  description: 'http or https, no credentials, a host that is (or resolves only to) public addresses.',
});
const Description = Type.Union([Type.String({ maxLength: 1000 }), Type.Null()]);
const EnabledEvents = Type.Array(Type.String({ minLength: 1, maxLength: 200 }), {
  minItems: 1,
  maxItems: 50,
  description: `Event types this endpoint takes, or ["*"] for every one (the default). Known: ${KNOWN_EVENT_TYPES.join(', ')}.`,
});
/** An endpoint's signature scheme, chosen at its creation. */
export const Scheme = Type.Union([Type.Literal('v1'), Type.Literal('v1a')], {
  description:
    'v1: HMAC-SHA256 with a whsec_ secret (the default); v1a: Ed25519, the business is given the whpk_ public key.',
});
const RateLimit = Type.Union([Type.Integer({ minimum: 1, maximum: 10_000 }), Type.Null()], {
  description:
    'At most this many attempts start per second to this endpoint, over every sender instance; null: no limit.',
});

/** The status a business sets on an endpoint. */
export const EndpointStatus = Type.Union([Type.Literal('enabled'), Type.Literal('disabled')], {
  description: 'disabled: nothing is sent to it (disabled_reason "manual"); enabled: turns it on again.',
});

const CreateBody = Type.Object(
  {
    url: Url,
    description: Type.Optional(Description),
    enabled_events: Type.Optional(EnabledEvents),
    signature_scheme: Type.Optional(Scheme),
    rate_limit_per_second: Type.Optional(RateLimit),
  },
  { additionalProperties: true, title: 'WebhookEndpointCreate' },
);

const UpdateBody = Type.Object(
  {
    url: Type.Optional(Url),
    description: Type.Optional(Description),
    enabled_events: Type.Optional(EnabledEvents),
    status: Type.Optional(EndpointStatus),
    signature_scheme: Type.Optional(
      Type.Union([Type.Literal('v1'), Type.Literal('v1a')], {
        description: 'Fixed at creation: only its current value is accepted.',
      }),
    ),
    rate_limit_per_second: Type.Optional(RateLimit),
  },
  { additionalProperties: true, title: 'WebhookEndpointUpdate' },
);

/** An endpoint as the API answers it. */
export const WebhookEndpoint = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    url: Type.String(),
    description: Type.Union([Type.String(), Type.Null()]),
    enabled_events: Type.Array(Type.String()),
    status: Type.Union([Type.Literal('enabled'), Type.Literal('disabled')]),
    disabled_reason: Type.Union([Type.Literal('manual'), Type.Literal('failing'), Type.Null()]),
    signature_scheme: Type.Union([Type.Literal('v1'), Type.Literal('v1a')]),
    secret_scope: Type.Union([Type.Literal('endpoint'), Type.Literal('account')], {
      description:
        'endpoint: signed with its own secrets (/webhook-endpoints/{id}/signing-secrets); account: made through the settings webhook_urls, signed with the business secrets (/accounts/signing-secrets).',
    }),
    rate_limit_per_second: Type.Union([Type.Integer(), Type.Null()]),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
    failure: EndpointFailure,
  },
  { title: 'WebhookEndpoint' },
);

const IdParams = Type.Object({ id: Type.String() });
type IdParams = Static<typeof IdParams>;

/** 422 naming each field of a filter that is not valid, else the filter as stored. */
function filterOf(events: readonly string[] | undefined): string[] | undefined {
  if (events === undefined) return undefined;
  const result = normalizeFilter(events, KNOWN_EVENT_TYPES);
  if (!result.ok) {
    throw new ApiError('validation_failed', 'The endpoint names event types that do not exist.', {
      details: result.problems,
    });
  }
  return result.filter;
}

/**
 * `/webhook-endpoints`: a business's webhook destinations as objects, each with its filter,
 * status, signature scheme, own secrets and optional rate limit (docs/service-interface.md,
 * "Webhook endpoints"). Another business's endpoint is a 404, as an unknown one.
 */
export const webhookEndpointRoutes: FastifyPluginAsync<{
  database: Database;
  config: SenderConfig;
  resolve?: Resolver | undefined;
  /** The clock of the failure warnings and of enabling (default: the system's). */
  now?: (() => Date) | undefined;
}> = async (app, { database, config, resolve, now = () => new Date() }) => {
  const { db } = database;
  /** Endpoints as the API answers them, each with its `failure`. */
  const present = (rows: readonly EndpointRow[]) =>
    withFailures(database, config, rows.map(toEndpointView), now());

  /** The SSRF rules of the settings' webhook_urls, with their messages; 422 naming `url`. */
  async function vetUrl(url: string): Promise<void> {
    const check = await checkWebhookUrl(url, {
      allowPrivate: config.allowPrivateWebhooks,
      ...(resolve ? { resolve } : {}),
    });
    // A host that does not resolve now is accepted: DNS may be down, and every attempt checks again.
    if (!check.ok && check.code !== 'unresolvable_host') {
      throw new ApiError('validation_failed', 'The webhook URL cannot receive events.', {
        details: [{ field: 'url', message: check.message }],
      });
    }
  }

  app.post<{ Body: Static<typeof CreateBody> }>(
    '/webhook-endpoints',
    {
      schema: {
        summary: 'Create a webhook endpoint',
        operationId: 'createWebhookEndpoint',
        description: `An endpoint takes the events its enabled_events name (["*"], every event, by default) from the moment it is made. A v1 endpoint gets its own whsec_ secret, a v1a endpoint an Ed25519 key pair whose whpk_ public key is shown (GET /webhook-endpoints/{id}/signing-secrets). At most ${MAX_ENDPOINTS} endpoints per business and mode.`,
        body: CreateBody,
        response: { 201: Type.Object({ data: WebhookEndpoint }) },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const enabledEvents = filterOf(body.enabled_events);
      await vetUrl(body.url);
      return idempotentWrite(db, request, reply, 201, async (tx) => {
        const row = await createEndpoint(tx, request.principal, {
          url: body.url,
          description: body.description ?? null,
          ...(enabledEvents ? { enabledEvents } : {}),
          ...(body.signature_scheme ? { signatureScheme: body.signature_scheme } : {}),
          rateLimitPerSecond: body.rate_limit_per_second ?? null,
        });
        return { data: { ...toEndpointView(row), failure: null } };
      });
    },
  );

  app.get<{ Querystring: PageQuery }>(
    '/webhook-endpoints',
    { schema: listSchema('List webhook endpoints', 'listWebhookEndpoints', WebhookEndpoint) },
    async (request) => {
      const { rows, pagination } = await listPage(
        request.query,
        selectEndpoints(db, request.principal).select(microsColumn.as('micros')),
      );
      return { data: await present(rows as EndpointRow[]), pagination };
    },
  );

  app.get<{ Params: IdParams }>(
    '/webhook-endpoints/:id',
    {
      schema: {
        summary: 'Read a webhook endpoint',
        operationId: 'getWebhookEndpoint',
        params: IdParams,
        response: { 200: Type.Object({ data: WebhookEndpoint }) },
      },
    },
    async (request) => ({
      data: (await present([await getEndpoint(db, request.principal, request.params.id)]))[0],
    }),
  );

  app.patch<{ Params: IdParams; Body: Static<typeof UpdateBody> }>(
    '/webhook-endpoints/:id',
    {
      schema: {
        summary: 'Update a webhook endpoint',
        operationId: 'updateWebhookEndpoint',
        description:
          'Absent fields stay as they are. A filter change applies to events made after it. status "disabled" stops every attempt to the endpoint (disabled_reason "manual"); "enabled" turns it on again. signature_scheme is fixed at creation: make a new endpoint for another scheme.',
        params: IdParams,
        body: UpdateBody,
        response: { 200: Type.Object({ data: WebhookEndpoint }) },
      },
    },
    async (request) => {
      const body = request.body;
      const current = await getEndpoint(db, request.principal, request.params.id);
      if (body.signature_scheme !== undefined && body.signature_scheme !== current.signature_scheme) {
        throw new ApiError('validation_failed', 'An endpoint keeps the signature scheme it was made with.', {
          details: [
            {
              field: 'signature_scheme',
              message: `is ${current.signature_scheme} and cannot change: create a new endpoint with ${body.signature_scheme}`,
            },
          ],
        });
      }
      const enabledEvents = filterOf(body.enabled_events);
      if (body.url !== undefined) await vetUrl(body.url);
      // What a status or URL change does beside the row: endpoints/lifecycle.ts, updateEndpoint.
      const row = await db.transaction().execute((tx) =>
        updateEndpoint(
          tx,
          request.principal,
          current.id,
          {
            ...(body.url !== undefined ? { url: body.url } : {}),
            ...(body.description !== undefined ? { description: body.description } : {}),
            ...(enabledEvents ? { enabledEvents } : {}),
            ...(body.rate_limit_per_second !== undefined
              ? { rateLimitPerSecond: body.rate_limit_per_second }
              : {}),
            ...(body.status !== undefined ? { status: body.status } : {}),
          },
          now(),
        ),
      );
      if (!row) throw new ApiError('not_found', `No webhook endpoint ${JSON.stringify(request.params.id)}.`);
      return { data: (await present([row]))[0] };
    },
  );

  app.delete<{ Params: IdParams }>(
    '/webhook-endpoints/:id',
    {
      schema: {
        summary: 'Delete a webhook endpoint',
        operationId: 'deleteWebhookEndpoint',
        description:
          'Its secrets go with it, and its pending deliveries end (failed, endpoint_deleted). Past deliveries and their attempts stay readable under their events.',
        params: IdParams,
        response: {
          200: Type.Object({ data: Type.Object({ id: Type.String(), deleted: Type.Literal(true) }) }),
        },
      },
    },
    async (request) => {
      const deleted = await db
        .transaction()
        .execute((tx) => deleteEndpoint(tx, request.principal, request.params.id));
      if (!deleted)
        throw new ApiError('not_found', `No webhook endpoint ${JSON.stringify(request.params.id)}.`);
      return { data: { id: request.params.id, deleted: true as const } };
    },
  );

  await app.register(endpointSecretRoutes, { database });
};
