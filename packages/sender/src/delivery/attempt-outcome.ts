import { describeRetryAfter, type RetryAfter } from './retry-after.js';
import { RefusedLookupError } from './vetted-lookup.js';

/** Why an attempt failed: the URL checks' codes, then the transport's and the response's. */
export type AttemptErrorCode =
  | 'invalid_url'
  | 'unsupported_scheme'
  | 'credentials_in_url'
  | 'unresolvable_host'
  | 'non_public_address'
  | 'connect_timeout'
  | 'timeout'
  | 'connection_refused'
  | 'tls_error'
  | 'network_error'
  | 'redirect'
  | 'unexpected_status';

/** What one attempt did: recorded as it is with the delivery. */
export interface AttemptOutcome {
  /** True only for HTTP 200 exactly (the spec's definition of a delivered event). */
  ok: boolean;
  /** The response status, or `null` when no response arrived. */
  statusCode: number | null;
  /** From the start of the attempt (URL check included) to the end of the body read, or the failure. */
  latencyMs: number;
  /**
   * The first `maxResponseBytes` of the response body, UTF-8 decoded (a character cut at the limit is
   * dropped); `null` when no response arrived or its body was empty.
   */
  responseBody: string | null;
  /** Why the attempt failed; `null` if and only if `ok`. */
  error: { code: AttemptErrorCode; message: string } | null;
  /**
   * The receiver's `Retry-After`, on a 429 or 503 answer that gave a readable one (`retry-after.ts`):
   * the next attempt is no earlier. Absent or `null` otherwise.
   */
  retryAfter?: RetryAfter | null;
}

/** Success is 200 exactly (the spec); redirects are reported, never followed. */
export function judgeStatus(
  host: string,
  statusCode: number,
  location: string | string[] | undefined,
  retryAfter: RetryAfter | null = null,
): Pick<AttemptOutcome, 'ok' | 'error'> {
  if (statusCode === 200) return { ok: true, error: null };
  if (statusCode >= 300 && statusCode < 400) {
    const target = Array.isArray(location) ? location[0] : location;
    return {
      ok: false,
      error: {
        code: 'redirect',
        message: `${host} answered ${statusCode}${target ? ` (to ${target})` : ''}; redirects are not followed, so register the final URL.`,
      },
    };
  }
  return {
    ok: false,
    error: {
      code: 'unexpected_status',
      message: `${host} answered ${statusCode}${retryAfter ? ` (${describeRetryAfter(retryAfter)})` : ''}; only 200 acknowledges a webhook.`,
    },
  };
}

/**
 * Node's and OpenSSL's codes of a failed TLS handshake: a certificate that does not verify (expired,
 * self-signed, another host's) or a server that does not speak TLS on that port.
 */
const TLS_CODES =
  /^(?:ERR_SSL_|ERR_TLS_|CERT_|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT$|SELF_SIGNED_CERT_IN_CHAIN$|HOSTNAME_MISMATCH$|EPROTO$)/;

/** Maps a transport error from undici or Node to a stable code and a message saying what happened. */
export function describeError(
  error: unknown,
  context: { host: string; timedOut: boolean; totalTimeoutMs: number; connectTimeoutMs: number },
): { code: AttemptErrorCode; message: string } {
  if (context.timedOut) {
    return {
      code: 'timeout',
      message: `No complete response from ${context.host} within ${context.totalTimeoutMs} ms.`,
    };
  }
  if (error instanceof RefusedLookupError) return { code: error.refusal, message: error.message };
  const err = error as { code?: string; message?: string; errors?: unknown[] };
  // With happy eyeballs, a failure on every address arrives as an AggregateError of the attempts.
  const inner = (err.errors?.[0] ?? {}) as { code?: string };
  const code = err.code ?? inner.code;
  switch (code) {
    case 'UND_ERR_CONNECT_TIMEOUT':
      return {
        code: 'connect_timeout',
        message: `Could not connect to ${context.host} within ${context.connectTimeoutMs} ms.`,
      };
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
      return {
        code: 'timeout',
        message: `No complete response from ${context.host} within ${context.totalTimeoutMs} ms.`,
      };
    case 'ECONNREFUSED':
      return {
        code: 'connection_refused',
        message: `${context.host} refused the connection (nothing listens on that port).`,
      };
    default:
      if (code && TLS_CODES.test(code)) {
        return {
          code: 'tls_error',
          message: `TLS with ${context.host} failed: ${code}: ${err.message ?? String(error)}`,
        };
      }
      return {
        code: 'network_error',
        message: `Request to ${context.host} failed: ${code ? `${code}: ` : ''}${err.message ?? String(error)}`,
      };
  }
}
