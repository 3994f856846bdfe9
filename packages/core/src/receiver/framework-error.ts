import { isPayhookError, PayhookError, type PayhookErrorCode } from '../errors.js';
import type { Logger } from './logger.js';
import type { ReceiverResult } from './types.js';

/** What payhook reads of an error a framework or its body parser raised. */
interface FrameworkErrorFields {
  status?: unknown;
  statusCode?: unknown;
  type?: unknown;
  code?: unknown;
}

/**
 * Framework errors known by name, for one raised without a status: body-parser's and raw-body's
 * `type`, Fastify's `FST_ERR_*` code. With a status, the status decides.
 */
const KNOWN: Readonly<Record<string, PayhookErrorCode>> = {
  'entity.too.large': 'payload_too_large',
  FST_ERR_CTP_BODY_TOO_LARGE: 'payload_too_large',
  'entity.parse.failed': 'malformed_payload',
  'request.aborted': 'malformed_payload',
  'request.size.invalid': 'malformed_payload',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'malformed_payload',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'malformed_payload',
  'encoding.unsupported': 'unsupported_media_type',
  'charset.unsupported': 'unsupported_media_type',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupported_media_type',
};

/** One message per code: the same request gets the same answer whichever framework refused it. */
const MESSAGES: Partial<Record<PayhookErrorCode, string>> = {
  payload_too_large:
    'The body is larger than a body parser in front of the webhook handler accepts; mount payhook before the body parser, or raise its limit.',
  unsupported_media_type: 'Webhook events are JSON: send Content-Type: application/json.',
  malformed_payload: 'The request could not be read; send the event as it was signed.',
  internal_error: 'The webhook could not be handled; send it again.',
};

function httpStatus(error: FrameworkErrorFields): number | undefined {
  const status = typeof error.status === 'number' ? error.status : error.statusCode;
  return typeof status === 'number' && Number.isInteger(status) && status >= 400 && status <= 599
    ? status
    : undefined;
}

/**
 * Turns an error a framework raised on the webhook route (a body parser's refusal, Koa's
 * `ctx.throw`, Fastify's `FST_ERR_*`, a hook that threw) into a {@link PayhookError} with a stable
 * code. The framework's status stands: 413 is `payload_too_large`, 415 `unsupported_media_type`,
 * any other 4xx `malformed_payload` with that status; anything else, a fault of the server, is
 * 500 `internal_error`. A PayhookError is returned as it is.
 *
 * @example
 * ```ts
 * toPayhookError(Object.assign(new Error('request entity too large'), { status: 413, type: 'entity.too.large' }));
 * // PayhookError { code: 'payload_too_large', status: 413 }
 * toPayhookError(new TypeError('x is undefined')); // PayhookError { code: 'internal_error', status: 500 }
 * ```
 */
export function toPayhookError(error: unknown): PayhookError {
  if (isPayhookError(error)) return error;
  const fields: FrameworkErrorFields = typeof error === 'object' && error !== null ? error : {};
  const status = httpStatus(fields);
  const name = typeof fields.type === 'string' ? fields.type : fields.code;
  const code: PayhookErrorCode =
    status === undefined
      ? ((typeof name === 'string' && Object.hasOwn(KNOWN, name) ? KNOWN[name] : undefined) ??
        'internal_error')
      : status === 413
        ? 'payload_too_large'
        : status === 415
          ? 'unsupported_media_type'
          : status < 500
            ? 'malformed_payload'
            : 'internal_error';
  return new PayhookError(code, MESSAGES[code] as string, {
    cause: error,
    // A client error keeps the framework's status (a 403 of a body parser's verify stays 403).
    status: code === 'malformed_payload' && status !== undefined ? status : undefined,
  });
}

/**
 * The answer to an error met on the webhook route, by the framework before payhook read the
 * request or inside payhook's own handling: payhook's error body with the status and stable code
 * of {@link toPayhookError}. A server fault (5xx) is logged with its cause; a client error is the
 * client's and is not.
 *
 * @example
 * ```ts
 * receiver.handle(request).then(
 *   (result) => writeResponse(res, result),
 *   (error) => writeResponse(res, errorResult(error, receiver.logger)),
 * );
 * ```
 */
export function errorResult(error: unknown, logger: Logger): ReceiverResult {
  const payhookError = toPayhookError(error);
  if (payhookError.status >= 500) logger.error({ err: error }, 'payhook: the webhook route failed');
  return {
    status: payhookError.status,
    body: payhookError.toJSON() as unknown as Record<string, unknown>,
    headers: {},
  };
}
