import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';
import { KNOWN_EVENTS, PaymentSchema } from '@payhook/core';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { VERSION } from '../version.js';
import { ERROR_BODY_SCHEMA } from './errors.js';

/** The document's tags: one per part of the API, each route tagged by its path. */
const TAGS = [
  { name: 'settings', description: "The business's webhook URLs and signing secrets." },
  {
    name: 'webhook-endpoints',
    description:
      'Where events go: each endpoint with its event filter, status, signature scheme and secrets.',
  },
  { name: 'customers', description: 'The people who pay.' },
  { name: 'beneficiaries', description: 'Where payouts go.' },
  { name: 'payments', description: 'Payment sessions, their capture, and the payments they become.' },
  {
    name: 'events',
    description: 'The events the service sent, their deliveries and attempts, and redelivery.',
  },
  {
    name: 'listen',
    description: 'New events streamed to `payhook listen`, and what it did with them.',
  },
  { name: 'sandbox', description: 'Test mode only: make a customer pay, or fail, without a bank.' },
  { name: 'operations', description: 'Health and metrics; no API key.' },
] as const;

function tagOf(url: string): string {
  const first = url.split('/')[1] ?? '';
  if (first === 'accounts') return 'settings';
  if (first === 'payment-sessions' || first === 'payments') return 'payments';
  if (first === 'healthz' || first === 'metrics') return 'operations';
  return TAGS.some((t) => t.name === first) ? first : 'operations';
}

/** The Standard Webhooks headers every attempt carries, as OpenAPI header parameters. */
const SIGNATURE_HEADERS = [
  ['webhook-id', 'The event id: the same on every attempt and redelivery.'],
  ['webhook-timestamp', 'Seconds since the epoch, at this attempt.'],
  [
    'webhook-signature',
    'v1,<base64 HMAC-SHA256 of "id.timestamp.body"> per valid signing secret, space-separated.',
  ],
].map(([name, description]) => ({
  name: name as string,
  in: 'header' as const,
  required: true,
  description: description as string,
  schema: { type: 'string' as const },
}));

/**
 * The three events the service sends, as the OpenAPI 3.1 `webhooks` section: each a POST of
 * `{ event, data, checksum }` whose `data` is core's `PaymentSchema` (the schema the typed events
 * are parsed with), so merchants in other languages can generate their types from it.
 */
export const WEBHOOKS = Object.fromEntries(
  KNOWN_EVENTS.map((name) => [
    name,
    {
      post: {
        summary: `The ${name} event`,
        operationId: name.replace(/\.(\w)/g, (_m, c: string) => c.toUpperCase()),
        tags: ['events'],
        description:
          'Sent to every registered webhook URL. The body is signed twice: `checksum` (HMAC-SHA256 keyed by the business id over "event|canonical data") and the webhook-signature header. Only a 200 answer counts as delivered; anything else is retried for 48 hours.',
        parameters: SIGNATURE_HEADERS,
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: Type.Object(
                {
                  event: Type.Literal(name),
                  data: PaymentSchema,
                  checksum: Type.String({ pattern: '^[0-9a-f]{64}$', description: 'HMAC-SHA256, hex' }),
                },
                { additionalProperties: false },
              ),
            },
          },
        },
        responses: {
          '200': { description: 'Acknowledged: the only answer that counts as delivered.' },
          '401': { description: 'Refused: the checksum or the signature does not verify (retried).' },
        },
      },
    },
  ]),
);

/** The `webhooks` section's type in the plugin's options (OpenAPI 3.1's). */
type Webhooks = NonNullable<
  Extract<NonNullable<FastifyDynamicSwaggerOptions['openapi']>, { webhooks?: unknown }>['webhooks']
>;

/** The options of @fastify/swagger: the document's header, components, tags and webhooks. */
export const OPENAPI_OPTIONS: FastifyDynamicSwaggerOptions = {
  openapi: {
    openapi: '3.1.0',
    info: {
      title: 'payhook reference sender',
      version: VERSION,
      license: { name: 'MIT', identifier: 'MIT' },
      description:
        'Payment sessions, payments, customers, beneficiaries and settings; events are delivered to every registered webhook URL (see `webhooks`). Every error answers with the Error schema: a stable code, its status, a message and the fields that failed.',
    },
    servers: [{ url: 'http://127.0.0.1:8080', description: 'A local sender (payhook serve)' }],
    tags: TAGS.map((tag) => ({ ...tag })),
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: { Error: ERROR_BODY_SCHEMA },
    },
    security: [{ bearer: [] }],
    // TypeBox's schema types are JSON Schema, which OpenAPI 3.1's schema objects are.
    webhooks: WEBHOOKS as unknown as Webhooks,
  },
  transformObject: (documents) => {
    if (!('openapiObject' in documents)) return documents.swaggerObject;
    optionalBodies(documents.openapiObject);
    return documents.openapiObject;
  },
};

type Operation = {
  requestBody?: {
    required?: boolean;
    content?: Record<string, { schema?: { anyOf?: { type?: string }[] } }>;
  };
  responses?: Record<string, unknown>;
  security?: unknown[];
};

/** The answer of every refusal: the Error schema, with its stable code. */
const ERROR_RESPONSE = {
  description: 'Refused: the Error body says why (a stable code, its status, a message, the fields).',
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
};

/**
 * Marks a request body optional where its schema admits `null` (the routes that take no body, or
 * an optional one: Fastify reads a missing body as null), since @fastify/swagger marks every body
 * required; and documents the refusals (4XX, the Error schema) of operations that list none.
 */
function optionalBodies(openapiObject: { paths?: unknown }): void {
  const paths = (openapiObject.paths ?? {}) as Record<string, Record<string, Operation>>;
  for (const item of Object.values(paths)) {
    for (const operation of Object.values(item)) {
      const body = operation.requestBody;
      const schema = body?.content?.['application/json']?.schema;
      if (body && schema?.anyOf?.some((s) => s.type === 'null')) body.required = false;
      // Every operation can be refused (a bad request, a missing key, an unknown id): documented
      // once here rather than on every route, since the error handler answers them all alike.
      const responses = operation.responses ?? {};
      if (!Object.keys(responses).some((code) => code.startsWith('4'))) responses['4XX'] = ERROR_RESPONSE;
      operation.responses = responses;
    }
  }
}

/** Tags each documented route by its path, unless it has tags of its own. */
export function tagRoutes(app: FastifyInstance): void {
  app.addHook('onRoute', (route) => {
    const schema = route.schema as { hide?: boolean; tags?: string[] } | undefined;
    if (!schema || schema.hide || schema.tags) return;
    schema.tags = [tagOf(route.url)];
  });
}
