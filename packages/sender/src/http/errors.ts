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
 * Maps every error the service can meet, Fastify's own included, to the API's error body and
 * status (DESIGN.md, "The reference sender": errors), so that no client input reaches a 500.
 */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  const e = error as FastifyLikeError;
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
  switch (e.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError(415, 'unsupported_media_type', 'Send JSON with Content-Type: application/json.');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError(413, 'payload_too_large', 'The body is too large.');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ApiError(400, 'invalid_request', 'The body is empty or its length is wrong.');
  }
  if (e.statusCode === 400 || error instanceof SyntaxError) {
    return new ApiError(400, 'invalid_request', `The body is not valid JSON: ${e.message}`);
  }
  if (e.statusCode && e.statusCode >= 400 && e.statusCode < 500) {
    return new ApiError(e.statusCode, 'invalid_request', e.message);
  }
  return new ApiError(500, 'internal_error', 'Something went wrong on our side; try again.');
}
