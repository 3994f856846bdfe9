import { isPayhookError } from '@payhook/core';
import type { FastifyReply } from 'fastify';
import { type DatabaseHealth, isDatabaseUnavailable } from '../db/health.js';
import { API_ERROR_STATUS, ApiError, type ApiErrorCode } from '../errors.js';

/**
 * The JSON Schema of every error answer, for the OpenAPI document: its `code` lists every code of
 * {@link API_ERROR_STATUS}, with the status of each.
 */
export const ERROR_BODY_SCHEMA = {
  title: 'Error',
  type: 'object' as const,
  required: ['error'],
  properties: {
    error: {
      type: 'object' as const,
      required: ['code', 'message'],
      properties: {
        code: {
          type: 'string' as const,
          enum: Object.keys(API_ERROR_STATUS),
          description: `The stable error code, with the HTTP status it is answered with: ${Object.entries(
            API_ERROR_STATUS,
          )
            .map(([code, status]) => `${code} ${status}`)
            .join(', ')}.`,
        },
        message: { type: 'string' as const, description: 'What went wrong and what to do next.' },
        details: {
          type: 'array' as const,
          description: 'The fields that failed validation.',
          items: {
            type: 'object' as const,
            required: ['field', 'message'],
            properties: { field: { type: 'string' as const }, message: { type: 'string' as const } },
          },
        },
      },
    },
  },
};

interface FastifyLikeError {
  statusCode?: number;
  code?: string;
  message: string;
  validation?: { instancePath?: string; params?: Record<string, unknown>; message?: string }[];
  validationContext?: string;
}

/**
 * The errors the framework and Node's HTTP server raise themselves, by their code, with the API
 * code (whose status is in `API_ERROR_STATUS`) and message each is answered with, so that none
 * reaches a client in its own shape. Fastify's router errors arrive through `frameworkErrors`,
 * the HTTP parser's through `clientErrorHandler`, the rest through the error handler.
 */
export const FRAMEWORK_ERRORS: Readonly<Record<string, { code: ApiErrorCode; message: string }>> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    code: 'unsupported_media_type',
    message: 'Send JSON with Content-Type: application/json.',
  },
  FST_ERR_CTP_BODY_TOO_LARGE: { code: 'payload_too_large', message: 'The body is too large.' },
  FST_ERR_CTP_EMPTY_JSON_BODY: {
    code: 'invalid_request',
    message: 'The body is empty or its length is wrong.',
  },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: {
    code: 'invalid_request',
    message: 'The body is empty or its length is wrong.',
  },
  FST_ERR_CTP_INVALID_JSON_BODY: {
    code: 'invalid_request',
    message: 'The body is not valid JSON.',
  },
  // A path that does not decode (bad percent-encoding): no route can match it.
  FST_ERR_BAD_URL: {
    code: 'invalid_request',
    message: 'The path holds percent-encoding that does not decode to UTF-8 text.',
  },
  // A path parameter over the router's 100 characters: longer than any id, so no such resource.
  FST_ERR_MAX_PARAM_LENGTH: {
    code: 'not_found',
    message: 'No resource has an id that long (ids are at most 100 characters).',
  },
  FST_ERR_NOT_FOUND: { code: 'not_found', message: 'No such route.' },
  // Node's HTTP parser: a request it cannot read.
  ERR_HTTP_REQUEST_TIMEOUT: {
    code: 'request_timeout',
    message: 'The request took too long to arrive.',
  },
  HPE_HEADER_OVERFLOW: {
    code: 'headers_too_large',
    message: 'The request headers are too large.',
  },
};

/** The answer to an error of the framework or of Node's HTTP server, if {@link FRAMEWORK_ERRORS} has it. */
export function frameworkError(error: unknown): ApiError | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  const known =
    typeof code === 'string' && Object.hasOwn(FRAMEWORK_ERRORS, code) ? FRAMEWORK_ERRORS[code] : undefined;
  return known && new ApiError(known.code, known.message);
}

/** The answer to a request Node's HTTP parser cannot read: its entry above, or a generic 400. */
export function malformedRequest(error: unknown): ApiError {
  return frameworkError(error) ?? new ApiError('invalid_request', 'The request is not valid HTTP.');
}

/** What a page size is, said wherever `limit` is refused. */
export const LIMIT_MESSAGE = 'must be an integer from 1 to 100 (the page size; default 15)';

type ValidationError = NonNullable<FastifyLikeError['validation']>[number] & { keyword?: string };

/**
 * The fields that failed, one line each: a value outside a set of constants (TypeBox's union of
 * literals, which Ajv reports as one "must be equal to constant" per member and an anyOf) becomes
 * "must be one of a, b, c"; `limit` says what a page size is.
 */
function validationDetails(
  validation: ValidationError[],
  context: string | undefined,
): { field: string; message: string }[] {
  const fields = new Map<string, { messages: string[]; allowed: unknown[]; anyOf: boolean }>();
  for (const v of validation) {
    const missing = v.params?.missingProperty;
    const field =
      `${(v.instancePath ?? '').replace(/^\//, '').replace(/\//g, '.')}${typeof missing === 'string' ? (v.instancePath ? '.' : '') + missing : ''}` ||
      context ||
      'body';
    const entry = fields.get(field) ?? { messages: [], allowed: [], anyOf: false };
    fields.set(field, entry);
    if (v.keyword === 'const' && v.params && 'allowedValue' in v.params)
      entry.allowed.push(v.params.allowedValue);
    else if (v.keyword === 'anyOf') entry.anyOf = true;
    else entry.messages.push(v.message ?? 'is invalid');
  }
  const details: { field: string; message: string }[] = [];
  for (const [field, { messages, allowed, anyOf }] of fields) {
    if (field === 'limit' || field.endsWith('.limit')) {
      details.push({ field, message: LIMIT_MESSAGE });
      continue;
    }
    if (allowed.length > 0 && (anyOf || allowed.length === 1) && messages.length === 0) {
      details.push({ field, message: `must be one of ${allowed.map(String).join(', ')}` });
      continue;
    }
    for (const message of messages) details.push({ field, message });
    if (allowed.length > 0)
      details.push({ field, message: `must be one of ${allowed.map(String).join(', ')}` });
  }
  return details;
}

/** The answer while the database is away: 503, and when to try again. */
export function databaseUnavailable(health?: DatabaseHealth): ApiError {
  return new ApiError(
    'database_unavailable',
    'The database is unavailable or did not answer in time. Try again after Retry-After seconds, with the same Idempotency-Key: a request that timed out may have been applied.',
    { retryAfterSeconds: health?.retryAfterSeconds() ?? 1 },
  );
}

/** Sends `error` as the API's error body, with its `Retry-After` when it has one. */
export function sendApiError(reply: FastifyReply, error: ApiError): FastifyReply {
  if (error.retryAfterSeconds !== undefined) reply.header('retry-after', String(error.retryAfterSeconds));
  return reply.code(error.status).send(error.toJSON());
}

/**
 * Maps every error the service can meet, Fastify's own included, to the API's error body and
 * status (docs/design.md: errors), so that no client input reaches a 500 and a database outage is
 * a 503 `database_unavailable`.
 */
export function toApiError(error: unknown, health?: DatabaseHealth): ApiError {
  if (error instanceof ApiError) return error;
  if (isDatabaseUnavailable(error)) return databaseUnavailable(health);
  const e = (error ?? {}) as FastifyLikeError;
  if (e.validation) {
    const details = validationDetails(e.validation, e.validationContext);
    // A body that is not an object is a malformed request (400); fields that fail are 422.
    if (
      e.validationContext === 'body' &&
      details.some((d) => d.field === 'body' && /object/.test(d.message))
    ) {
      return new ApiError('invalid_request', 'The body must be a JSON object.');
    }
    return new ApiError(
      e.validationContext === 'body' ? 'validation_failed' : 'invalid_request',
      'The request has invalid fields.',
      { details },
    );
  }
  const known = frameworkError(error);
  if (known) return known;
  // A PayhookError of core (a body it refuses to encode, for one) carries its own 4xx status.
  if (isPayhookError(error) && error.status < 500) {
    return new ApiError('invalid_request', error.message, { status: error.status });
  }
  if (error instanceof SyntaxError) {
    return new ApiError('invalid_request', `The body is not valid JSON: ${e.message}`);
  }
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    return new ApiError('invalid_request', e.message, { status: e.statusCode });
  }
  return new ApiError('internal_error', 'Something went wrong on our side; try again.');
}
