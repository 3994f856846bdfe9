/**
 * Stable error codes of payhook and their HTTP statuses. Match on `code`, never on `message`.
 *
 * @example
 * ```ts
 * ERROR_STATUS.invalid_checksum; // 401
 * ```
 *
 * The HTTP status beside each code is the one the receiver pipeline answers with
 * (see docs/decisions.md and the status table in the core README).
 */
export const ERROR_STATUS = {
  malformed_payload: 400,
  invalid_checksum: 401,
  invalid_signature: 401,
  signature_timestamp_out_of_tolerance: 401,
  signature_required: 401,
  ip_not_allowed: 403,
  not_found: 404,
  method_not_allowed: 405,
  payload_too_large: 413,
  unsupported_media_type: 415,
  handler_failed: 500,
  handler_timeout: 500,
  internal_error: 500,
  client_address_unknown: 500,
  store_unavailable: 503,
  queue_full: 503,
  shutting_down: 503,
} as const;

/** One of payhook's stable error codes. */
export type PayhookErrorCode = keyof typeof ERROR_STATUS;

/** Extra fields of a {@link PayhookError}. */
export interface PayhookErrorOptions {
  /** The error that led to this one. */
  cause?: unknown;
  /** Overrides the HTTP status that belongs to the code. */
  status?: number;
  /** Machine-readable details (for example validation issues). */
  details?: readonly PayhookErrorDetail[];
}

/** One machine-readable detail of an error, such as a field that failed validation. */
export interface PayhookErrorDetail {
  /** Where the problem is: a JSON pointer (`/data/amount`) or a field name. */
  field?: string;
  message: string;
}

/**
 * The error type of every payhook package: a stable `code`, the HTTP `status` that goes with it,
 * a `message` that says what to do next, and the `cause`.
 *
 * @example
 * ```ts
 * const result = verifyChecksum({ rawBody }, { businessIds: ['biz_123'] });
 * if (!result.ok && result.error.code === 'invalid_checksum') {
 *   console.warn(result.error.message);
 * }
 * ```
 */
export class PayhookError extends Error {
  override readonly name = 'PayhookError';
  readonly code: PayhookErrorCode;
  readonly status: number;
  readonly details: readonly PayhookErrorDetail[];

  constructor(code: PayhookErrorCode, message: string, options: PayhookErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.status = options.status ?? ERROR_STATUS[code];
    this.details = options.details ?? [];
  }

  /** The JSON body the receiver answers with: `{"error": {"code", "message"}}`. */
  toJSON(): { error: { code: PayhookErrorCode; message: string; details?: readonly PayhookErrorDetail[] } } {
    return {
      error: {
        code: this.code,
        message: this.message,
        ...(this.details.length > 0 ? { details: this.details } : {}),
      },
    };
  }
}

/**
 * Whether `value` is a {@link PayhookError}, also across copies of the package
 * (an ESM and a CJS copy loaded side by side).
 *
 * @example
 * ```ts
 * try { lexicalCanonicalJson(body); } catch (err) { if (isPayhookError(err)) console.log(err.code); }
 * ```
 */
export function isPayhookError(value: unknown): value is PayhookError {
  return (
    value instanceof PayhookError ||
    (value instanceof Error &&
      value.name === 'PayhookError' &&
      typeof (value as { code?: unknown }).code === 'string' &&
      (value as unknown as { code: string }).code in ERROR_STATUS)
  );
}
