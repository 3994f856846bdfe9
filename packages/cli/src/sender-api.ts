import { randomUUID } from 'node:crypto';

/** One request made to the sender's API, as `--json` reports it. */
export interface ApiCall {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** The path and query, relative to the base URL (`/payment-sessions`). */
  path: string;
  /** The status of its last answer. */
  status: number;
}

/** The sender could not be reached, or did not answer in time: nothing is known of the call. */
export class SenderUnreachableError extends Error {
  override readonly name = 'SenderUnreachableError';
  constructor(
    /** The base URL asked for. */
    readonly baseUrl: string,
    /** Why, such as `ECONNREFUSED` or `no answer within 15 s`. */
    readonly reason: string,
  ) {
    super(`Could not reach the sender at ${baseUrl}: ${reason}.`);
  }
}

/** The sender answered with an error (or with something that is not its API's answer). */
export class SenderRefusedError extends Error {
  override readonly name = 'SenderRefusedError';
  constructor(
    readonly call: ApiCall,
    /** The API's error code (`error.code`), when the answer carried one. */
    readonly code: string | undefined,
    /** The API's error message, or what was wrong with the answer. */
    readonly detail: string,
    /** The fields the API says failed (`error.details`), for a `validation_failed`. */
    readonly fields: readonly { field: string; message: string }[] = [],
  ) {
    super(
      `the sender refused ${call.method} ${call.path}: ${call.status}${code ? ` ${code}` : ''}: ${detail}`,
    );
  }
}

/** How a {@link SenderApi} reaches the sender. */
export interface SenderApiOptions {
  /** The sender's base URL; a path on it (`https://host/payhook`) is kept. */
  baseUrl: string;
  /** The API key, sent as `Authorization: Bearer <key>`. */
  apiKey: string;
  /** How long one attempt may take (default 15 s). */
  timeoutMs?: number;
  /** Pause before a retry (default 500 ms, doubled each time); tests make it short. */
  retryDelayMs?: number;
}

/** How many times a call is sent at most: a first attempt and two retries. */
const ATTEMPTS = 3;
/** Answers worth another attempt: the sender is restarting, overloaded, or behind a proxy that is. */
const RETRY_STATUS = new Set([502, 503, 504]);
/** Errors of a connection that was open, then lost: the request may or may not have arrived. */
const RETRY_ERRORS = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);

/** The code or message of a failed fetch: `ECONNREFUSED`, `ENOTFOUND`, a TLS error... */
function reasonOf(error: unknown): string {
  const e = error as Error & { cause?: { code?: string; message?: string } };
  if (e.name === 'TimeoutError') return '';
  return e.cause?.code ?? e.cause?.message ?? e.message;
}

/**
 * A small client of the sender's API: JSON in and out, the key as a bearer token, a time-out per
 * attempt, and an `Idempotency-Key` on every POST, kept across its retries, so that a call
 * retried after a lost connection or a 502/503/504 (or a 409 `idempotency_in_progress`) is
 * answered once: the sender replays the first answer rather than doing it twice. Every call made
 * is recorded in {@link SenderApi.calls}.
 *
 * @example
 * ```ts
 * const api = new SenderApi({ baseUrl: 'http://127.0.0.1:8080', apiKey: 'sk_test_...' });
 * const session = await api.post('/payment-sessions', request);
 * ```
 */
export class SenderApi {
  /** Every call made, in order, with the status it was last answered. */
  readonly calls: ApiCall[] = [];
  readonly #base: URL;
  readonly #options: SenderApiOptions;

  constructor(options: SenderApiOptions) {
    this.#options = options;
    const base = new URL(options.baseUrl);
    base.search = '';
    base.hash = '';
    if (!base.pathname.endsWith('/')) base.pathname += '/';
    this.#base = base;
  }

  /** `GET path`; resolves to the answer's JSON, or rejects with a {@link SenderRefusedError} or {@link SenderUnreachableError}. */
  get<T>(path: string): Promise<T> {
    return this.#call<T>('GET', path, undefined);
  }

  /** `POST path` with `body` as JSON (none when undefined), under a fresh Idempotency-Key. */
  post<T>(path: string, body?: unknown): Promise<T> {
    return this.#call<T>('POST', path, body);
  }

  /** `PATCH path` with `body` as JSON: a whole new value, so a retry sets the same thing again. */
  patch<T>(path: string, body: unknown): Promise<T> {
    return this.#call<T>('PATCH', path, body);
  }

  /** `DELETE path`: a retry after a lost answer finds nothing left to delete (a 404). */
  delete<T>(path: string): Promise<T> {
    return this.#call<T>('DELETE', path, undefined);
  }

  async #call<T>(method: ApiCall['method'], path: string, body: unknown): Promise<T> {
    const url = new URL(path.replace(/^\//, ''), this.#base);
    const timeoutMs = this.#options.timeoutMs ?? 15_000;
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.#options.apiKey}`,
      accept: 'application/json',
      ...(method === 'POST' ? { 'idempotency-key': randomUUID() } : {}),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    };
    const call: ApiCall = { method, path, status: 0 };
    for (let attempt = 1; ; attempt++) {
      let response: Response;
      try {
        response = await fetch(url, {
          method,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
          redirect: 'manual',
          signal: AbortSignal.timeout(timeoutMs),
        });
      } catch (error) {
        const reason = reasonOf(error);
        if (RETRY_ERRORS.has(reason) && attempt < ATTEMPTS) {
          await this.#pause(attempt);
          continue;
        }
        throw new SenderUnreachableError(
          this.#options.baseUrl,
          reason || `no answer within ${timeoutMs / 1000} s`,
        );
      }
      const text = await response.text();
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {}
      const error = (json as { error?: { code?: unknown; message?: unknown; details?: unknown } } | undefined)
        ?.error;
      const retry =
        RETRY_STATUS.has(response.status) ||
        (response.status === 409 && error?.code === 'idempotency_in_progress');
      if (retry && attempt < ATTEMPTS) {
        await this.#pause(attempt);
        continue;
      }
      call.status = response.status;
      this.calls.push(call);
      if (response.status >= 300 && response.status < 400) {
        const location = response.headers.get('location');
        throw new SenderRefusedError(
          call,
          undefined,
          `redirected${location ? ` to ${location}` : ''}; give the address it redirects to as --base-url`,
        );
      }
      if (!response.ok) {
        if (typeof error?.code === 'string') {
          throw new SenderRefusedError(
            call,
            error.code,
            String(error.message ?? ''),
            fieldsOf(error.details),
          );
        }
        throw new SenderRefusedError(call, undefined, notTheApi(this.#options.baseUrl));
      }
      if (json === undefined || json === null || typeof json !== 'object') {
        throw new SenderRefusedError(
          call,
          undefined,
          `the answer is not JSON; ${notTheApi(this.#options.baseUrl)}`,
        );
      }
      return json as T;
    }
  }

  #pause(attempt: number): Promise<void> {
    const ms = (this.#options.retryDelayMs ?? 500) * 2 ** (attempt - 1);
    return new Promise((resolve) => setTimeout(resolve, ms));
  }
}

/** The API's `details` (the fields that failed), kept only in the shape it documents. */
function fieldsOf(details: unknown): { field: string; message: string }[] {
  if (!Array.isArray(details)) return [];
  return details.flatMap((d: { field?: unknown; message?: unknown }) =>
    typeof d?.field === 'string' && typeof d.message === 'string'
      ? [{ field: d.field, message: d.message }]
      : [],
  );
}

/** What to say of an answer that is not the API's. */
const notTheApi = (baseUrl: string) =>
  `not an answer of payhook's API (is ${baseUrl} a payhook sender, at the right path?)`;
