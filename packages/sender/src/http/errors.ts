import { isPayhookError } from '@payhook/core';

/** One field that failed validation. */
export interface FieldError {
  field: string;
  message: string;
}

/** An error the API answers with `{"error": {"code", "message", "details"}}` and its status. */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: FieldError[] = [],
  ) {
    super(message);
  }

  toJSON() {
    return {
      error: {
        code: this.code,
        message: this.message,
        ...(this.details.length ? { details: this.details } : {}),
      },
    };
  }
}

interface FastifyLikeError {
  statusCode?: number;
  code?: string;
  message: string;
  validation?: { instancePath?: string; params?: Record<string, unknown>; message?: string }[];
  validationContext?: string;
}

/**
 * The errors the framework and Node's HTTP server raise themselves, by their code, with the status,
 * API code and message each is answered with: one table, so that none reaches a client in its own
 * shape. Fastify's router errors arrive through `frameworkErrors`, the HTTP parser's through
 * `clientErrorHandler`, the rest through the error handler.
 */
export const FRAMEWORK_ERRORS: Readonly<Record<string, { status: number; code: string; message: string }>> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    status: 415,
    code: 'unsupported_media_type',
    message: 'Send JSON with Content-Type: application/json.',
  },
  FST_ERR_CTP_BODY_TOO_LARGE: { status: 413, code: 'payload_too_large', message: 'The body is too large.' },
  FST_ERR_CTP_EMPTY_JSON_BODY: {
    status: 400,
    code: 'invalid_request',
    message: 'The body is empty or its length is wrong.',
  },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: {
    status: 400,
    code: 'invalid_request',
    message: 'The body is empty or its length is wrong.',
  },
  FST_ERR_CTP_INVALID_JSON_BODY: {
    status: 400,
    code: 'invalid_request',
    message: 'The body is not valid JSON.',
  },
  // A path that does not decode (bad percent-encoding): no route can match it.
  FST_ERR_BAD_URL: {
    status: 400,
    code: 'invalid_request',
    message: 'The path holds percent-encoding that does not decode to UTF-8 text.',
  },
  // A path parameter over the router's 100 characters: longer than any id, so no such resource.
  FST_ERR_MAX_PARAM_LENGTH: {
    status: 404,
    code: 'not_found',
    message: 'No resource has an id that long (ids are at most 100 characters).',
  },
  FST_ERR_NOT_FOUND: { status: 404, code: 'not_found', message: 'No such route.' },
  // Node's HTTP parser: a request it cannot read.
  ERR_HTTP_REQUEST_TIMEOUT: {
    status: 408,
    code: 'request_timeout',
    message: 'The request took too long to arrive.',
  },
  HPE_HEADER_OVERFLOW: {
    status: 431,
    code: 'headers_too_large',
    message: 'The request headers are too large.',
  },
};

/** What a malformed HTTP request gets when Node's parser has no more specific entry above. */
export const MALFORMED_REQUEST = {
  status: 400,
  code: 'invalid_request',
  message: 'The request is not valid HTTP.',
} as const;

/**
 * Maps every error the service can meet, Fastify's own included, to the API's error body and
 * status (DESIGN.md, "The reference sender": errors), so that no client input reaches a 500.
 */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  const e = (error ?? {}) as FastifyLikeError;
  if (e.validation) {
    const details = e.validation.map((v) => {
      const missing = v.params?.missingProperty;
      const path = `${(v.instancePath ?? '').replace(/^\//, '').replace(/\//g, '.')}${typeof missing === 'string' ? (v.instancePath ? '.' : '') + missing : ''}`;
      return { field: path || e.validationContext || 'body', message: v.message ?? 'is invalid' };
    });
    // A body that is not an object is a malformed request (400); fields that fail are 422.
    if (
      e.validationContext === 'body' &&
      details.some((d) => d.field === 'body' && /object/.test(d.message))
    ) {
      return new ApiError(400, 'invalid_request', 'The body must be a JSON object.');
    }
    const status = e.validationContext === 'body' ? 422 : 400;
    return new ApiError(
      status,
      status === 422 ? 'validation_failed' : 'invalid_request',
      'The request has invalid fields.',
      details,
    );
  }
  const known = e.code === undefined ? undefined : FRAMEWORK_ERRORS[e.code];
  if (known) return new ApiError(known.status, known.code, known.message);
  // A PayhookError of core (a body it refuses to encode, for one) carries its own 4xx status.
  if (isPayhookError(error) && error.status < 500) {
    return new ApiError(error.status, 'invalid_request', error.message);
  }
  if (error instanceof SyntaxError) {
    return new ApiError(400, 'invalid_request', `The body is not valid JSON: ${e.message}`);
  }
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    return new ApiError(e.statusCode, 'invalid_request', e.message);
  }
  return new ApiError(500, 'internal_error', 'Something went wrong on our side; try again.');
}
