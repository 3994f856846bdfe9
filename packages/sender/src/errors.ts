/**
 * Stable error codes of the sender's API and the HTTP status of each: one table, as core's
 * `ERROR_STATUS`, listed in the OpenAPI document. Match on `code`, never on `message`.
 *
 * @example
 * ```ts
 * API_ERROR_STATUS.session_expired; // 409
 * ```
 */
export const API_ERROR_STATUS = {
  /** Malformed: not JSON, not an object, a bad query parameter or header, an unreadable request. */
  invalid_request: 400,
  /** `after` or `before` is not a cursor this API returned. */
  invalid_cursor: 400,
  unauthorized: 401,
  /** A live key opened `GET /listen` without `live=true`. */
  live_listen_not_requested: 403,
  /** No such resource in this business and mode (a malformed id included), or no such route. */
  not_found: 404,
  request_timeout: 408,
  /** The payment is in a state that does not allow this. */
  invalid_state: 409,
  /** A sandbox completion of a session never captured. */
  not_captured: 409,
  session_expired: 409,
  duplicate_reference: 409,
  /** A redelivery with no webhook URL registered. */
  no_webhook_urls: 409,
  /** A request with the same Idempotency-Key is still running. */
  idempotency_in_progress: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  /** Fields fail validation: `details` lists them. */
  validation_failed: 422,
  /** The Idempotency-Key was used with a different request. */
  idempotency_key_reused: 422,
  /** A business has as many `GET /listen` streams open on this instance as it may. */
  too_many_listeners: 429,
  headers_too_large: 431,
  internal_error: 500,
  /**
   * The database cannot be reached or did not answer in time; try again after `Retry-After`
   * seconds. A request that timed out may have been applied: an `Idempotency-Key` makes the retry safe.
   */
  database_unavailable: 503,
} as const;

/** One of the sender API's stable error codes. */
export type ApiErrorCode = keyof typeof API_ERROR_STATUS;

/** One field that failed validation. */
export interface FieldError {
  field: string;
  message: string;
}

/** Extra fields of an {@link ApiError}. */
export interface ApiErrorOptions {
  /** The fields that failed validation. */
  details?: FieldError[];
  /** Overrides the status of the code: a client error of the framework or of core passed on as it came. */
  status?: number;
  /** Seconds the client should wait before trying again, sent as `Retry-After`. */
  retryAfterSeconds?: number;
}

/**
 * The one error class of the sender's API: a stable `code`, the HTTP `status` that goes with it
 * ({@link API_ERROR_STATUS}), a message that says what to do next, and the fields that failed.
 * Answered as `{"error": {"code", "message", "details"}}`.
 *
 * @example
 * ```ts
 * throw new ApiError('not_found', `No payment ${JSON.stringify(id)}.`);
 * throw new ApiError('validation_failed', 'The customer has invalid fields.', {
 *   details: [{ field: 'email', message: 'must be an email address' }],
 * });
 * ```
 */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  readonly status: number;
  readonly details: FieldError[];
  /** Sent as `Retry-After`, when set. */
  readonly retryAfterSeconds: number | undefined;

  constructor(
    readonly code: ApiErrorCode,
    message: string,
    options: ApiErrorOptions = {},
  ) {
    super(message);
    this.status = options.status ?? API_ERROR_STATUS[code];
    this.details = options.details ?? [];
    this.retryAfterSeconds = options.retryAfterSeconds;
  }

  /** The body the API answers with. */
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
