// One webhook attempt over HTTP, as DESIGN.md ("The reference sender": delivery, webhook URLs)
// describes it: success is 200 exactly, redirects are failures, 5 s to connect, 15 s in all, and the
// connection only ever goes to an address that was checked to be public (no SSRF, no DNS rebinding).
import type { LookupAddress, LookupOptions } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Agent, type Dispatcher } from 'undici';
import { classifyAddress } from '../net/public-address.js';
import { checkWebhookUrl, type Resolver, systemResolver, type WebhookUrlCheck } from '../net/webhook-url.js';

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
}

/** Options of {@link createDeliveryClient}. */
export interface DeliveryClientOptions {
  /** Resolves host names, at the URL check and again at connect time (default: the system resolver). */
  resolve?: Resolver;
  /** Deliver to private, loopback and other non-public addresses (local development only). */
  allowPrivate?: boolean;
  /** Time to resolve and connect (TLS handshake included), in ms (default 5000). */
  connectTimeoutMs?: number;
  /** Time for the whole attempt, reading the response body included, in ms (default 15000). */
  totalTimeoutMs?: number;
  /** How much of a response body is read and kept, in bytes (default 4096); the rest is discarded. */
  maxResponseBytes?: number;
  /** The `user-agent` header (default `payhook-sender`). */
  userAgent?: string;
  /** Most connections kept open per origin (default: no limit). */
  connectionsPerOrigin?: number;
}

/** One webhook request: the exact bytes to send and any extra headers. */
export interface DeliveryRequest {
  url: string;
  body: string;
  headers?: Record<string, string>;
}

/** Sends webhook attempts over one shared, keep-alive connection pool. */
export interface DeliveryClient {
  /** Makes one attempt; never throws: every failure is an {@link AttemptOutcome}. */
  send(request: DeliveryRequest): Promise<AttemptOutcome>;
  /** Closes the pool once the attempts in flight are done. */
  close(): Promise<void>;
  /** Closes the pool now, failing the attempts in flight (a shutdown that released them). */
  destroy(): Promise<void>;
}

/** True for the host of a URL written as an IPv4 or a bracketed IPv6 address. */
function isIpLiteral(hostname: string): boolean {
  return hostname.startsWith('[') || classifyAddress(hostname) !== 'invalid';
}

const DEFAULTS = {
  connectTimeoutMs: 5000,
  totalTimeoutMs: 15_000,
  maxResponseBytes: 4096,
  userAgent: 'payhook-sender',
};

/** Raised inside the connect-time lookup; carries the outcome code through undici unchanged. */
class RefusedLookupError extends Error {
  constructor(
    readonly refusal: 'non_public_address' | 'unresolvable_host',
    message: string,
  ) {
    super(message);
    this.name = 'RefusedLookupError';
  }
}

/**
 * Builds the `lookup` hook of the sockets: resolve with the injected resolver, refuse unless every
 * address is public, and hand the socket exactly the addresses that were vetted. Node calls it for
 * host names only (IP literals skip it; the attempt-time URL check covers those), and it runs again
 * for every new connection, so a name that now resolves somewhere private is caught even though the
 * attempt-time check passed a moment ago (DNS rebinding).
 */
function createVettedLookup(resolve: Resolver, allowPrivate: boolean): LookupFunction {
  const vet = async (hostname: string): Promise<string[]> => {
    let addresses: string[];
    try {
      addresses = [...(await resolve(hostname))];
    } catch (cause) {
      throw new RefusedLookupError(
        'unresolvable_host',
        `${hostname} could not be resolved (${(cause as Error).message}).`,
      );
    }
    if (addresses.length === 0)
      throw new RefusedLookupError('unresolvable_host', `${hostname} has no address.`);
    // An address that is not an IP at all (a broken resolver) is refused even with allowPrivate:
    // the socket could not connect to it anyway.
    const refused = addresses
      .map((address) => ({ address, class: classifyAddress(address) }))
      .filter((c) => c.class === 'invalid' || (!allowPrivate && c.class !== 'public'));
    if (refused.length > 0) {
      throw new RefusedLookupError(
        'non_public_address',
        `${hostname} resolves to a non-public address at connect time (${refused.map((c) => `${c.address}: ${c.class}`).join(', ')}); webhook URLs must be publicly reachable.`,
      );
    }
    return addresses;
  };

  return (hostname, options: LookupOptions, callback) => {
    vet(hostname).then(
      (vetted) => {
        const entries: LookupAddress[] = vetted
          .map((address) => ({ address, family: address.includes(':') ? 6 : 4 }))
          .filter((entry) => !options.family || entry.family === options.family);
        const first = entries[0];
        if (!first) {
          const error = new RefusedLookupError(
            'unresolvable_host',
            `${hostname} has no IPv${options.family} address.`,
          );
          callback(error, '', 0);
        } else if (options.all) {
          // Node asks for every address when autoSelectFamily (happy eyeballs, the default since
          // Node 20) is on, and for one address otherwise.
          callback(null, entries);
        } else {
          callback(null, first.address, first.family);
        }
      },
      (error: Error) => callback(error, '', 0),
    );
  };
}

const positiveInteger = (name: string, value: number | undefined, fallback: number): number => {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value <= 0) {
    throw new TypeError(`Invalid ${name}: ${value} (expected a positive integer)`);
  }
  return value;
};

/** Maps a transport error from undici or Node to a stable code and a message saying what happened. */
function describeError(
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
      return {
        code: 'network_error',
        message: `Request to ${context.host} failed: ${code ? `${code}: ` : ''}${err.message ?? String(error)}`,
      };
  }
}

/**
 * Creates the client that makes webhook attempts: a JSON POST over a shared keep-alive pool. Every
 * attempt checks the URL first ({@link checkWebhookUrl}: scheme, credentials, public addresses
 * only); every new connection resolves the host again and connects only to the addresses it just
 * vetted, so DNS rebinding cannot point a checked name at an internal service. Redirects are
 * reported, never followed. Only 200 counts as delivered.
 *
 * @example
 * ```ts
 * const client = createDeliveryClient();
 * const outcome = await client.send({
 *   url: 'https://merchant.example/webhooks/',
 *   body: JSON.stringify(event),
 *   headers: { 'x-payhook-attempt': '1' },
 * });
 * if (!outcome.ok) console.warn(outcome.error?.code, outcome.error?.message);
 * await client.close();
 * ```
 */
export function createDeliveryClient(options: DeliveryClientOptions = {}): DeliveryClient {
  const resolve = options.resolve ?? systemResolver;
  const allowPrivate = options.allowPrivate ?? false;
  const connectTimeoutMs = positiveInteger(
    'connectTimeoutMs',
    options.connectTimeoutMs,
    DEFAULTS.connectTimeoutMs,
  );
  const totalTimeoutMs = positiveInteger('totalTimeoutMs', options.totalTimeoutMs, DEFAULTS.totalTimeoutMs);
  const maxResponseBytes = positiveInteger(
    'maxResponseBytes',
    options.maxResponseBytes,
    DEFAULTS.maxResponseBytes,
  );
  const connections =
    options.connectionsPerOrigin === undefined
      ? null
      : positiveInteger('connectionsPerOrigin', options.connectionsPerOrigin, 1);
  const userAgent = options.userAgent ?? DEFAULTS.userAgent;

  const agent = new Agent({
    connections,
    connect: { timeout: connectTimeoutMs, lookup: createVettedLookup(resolve, allowPrivate) },
    // The attempt's own deadline (an abort signal) bounds everything; these only keep undici's
    // 300 s defaults from outliving it.
    headersTimeout: totalTimeoutMs,
    bodyTimeout: totalTimeoutMs,
  });

  /**
   * The checks of URLs whose host is an IP literal: they depend on the URL's text alone, so they
   * are made once (a host name is resolved and vetted again at every attempt).
   */
  const literalChecks = new Map<string, WebhookUrlCheck>();
  async function checkUrl(url: string): Promise<WebhookUrlCheck> {
    const check = await checkWebhookUrl(url, { resolve, allowPrivate });
    if (check.ok && check.addresses.length === 1 && isIpLiteral(check.url.hostname)) {
      if (literalChecks.size >= 1024) literalChecks.clear();
      literalChecks.set(url, check);
    }
    return check;
  }

  async function send(delivery: DeliveryRequest): Promise<AttemptOutcome> {
    const started = performance.now();
    const finish = (outcome: Omit<AttemptOutcome, 'latencyMs'>): AttemptOutcome => ({
      ...outcome,
      latencyMs: Math.round(performance.now() - started),
    });

    let host = delivery.url;
    // Filled as the response arrives, so that an attempt timing out mid-body still records what came.
    const response: ResponseState = { statusCode: null, location: undefined, chunks: [], size: 0 };
    let timedOut = false;
    /** Ends the attempt's current step when the deadline passes: the URL check, then the exchange. */
    let onTimeout = () => {};
    // Started before the URL check: the resolver is part of the attempt and may hang too. One
    // timer, not an AbortSignal: a signal and the listeners undici hangs on it cost more than the
    // rest of the client's own work per attempt.
    const timer = setTimeout(() => {
      timedOut = true;
      onTimeout();
    }, totalTimeoutMs);

    try {
      let check = literalChecks.get(delivery.url);
      if (check === undefined) {
        check = await new Promise<WebhookUrlCheck>((resolve, reject) => {
          onTimeout = () => reject(new Error('aborted'));
          checkUrl(delivery.url).then(resolve, reject);
        });
      }
      if (!check.ok) {
        return finish({
          ok: false,
          statusCode: null,
          responseBody: null,
          error: { code: check.code, message: check.message },
        });
      }
      host = check.url.host;

      const headers: Record<string, string> = { 'user-agent': userAgent };
      for (const name in delivery.headers) headers[name.toLowerCase()] = delivery.headers[name] as string;
      headers['content-type'] = 'application/json';

      const complete = await exchange(
        agent,
        {
          origin: check.url.origin,
          path: check.url.pathname + check.url.search,
          method: 'POST',
          headers,
          body: delivery.body,
        },
        response,
        maxResponseBytes,
        (stop) => {
          onTimeout = stop;
          // The deadline may have passed between the check and here.
          if (timedOut) stop();
        },
      );
      const statusCode = response.statusCode as number;
      const outcome = finish({
        statusCode,
        responseBody: decodeCapped(response.chunks, maxResponseBytes),
        ...judgeStatus(host, statusCode, response.location),
      });
      if (complete) {
        // undici hands a kept-alive socket back to its pool one event-loop turn after the response
        // ends (a setImmediate, in case the server closes it anyway); waiting for that turn lets the
        // next send to this origin reuse the connection instead of opening a second one.
        await new Promise((resolve) => setImmediate(resolve));
      }
      return outcome;
    } catch (error) {
      return finish({
        ok: false,
        statusCode: response.statusCode,
        responseBody: decodeCapped(response.chunks, maxResponseBytes),
        error: describeError(error, { host, timedOut, totalTimeoutMs, connectTimeoutMs }),
      });
    } finally {
      clearTimeout(timer);
    }
  }

  return {
    send,
    close: () => agent.close(),
    destroy: () => agent.destroy(),
  };
}

/** Success is 200 exactly (the spec); redirects are reported, never followed. */
function judgeStatus(
  host: string,
  statusCode: number,
  location: string | string[] | undefined,
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
      message: `${host} answered ${statusCode}; only 200 acknowledges a webhook.`,
    },
  };
}

/** What an exchange has received so far. */
interface ResponseState {
  statusCode: number | null;
  location: string | string[] | undefined;
  /** The first chunks of the body, up to just past the limit. */
  chunks: Buffer[];
  size: number;
}

/** Ends an exchange on purpose: the body passed its limit, or the attempt's deadline came. */
class StopExchange extends Error {}

/**
 * Makes one request through undici's dispatcher and reads the response into `response`: at most
 * `limit` bytes of its body, after which the exchange is aborted so that a huge or endless body
 * costs nothing more (the connection is dropped rather than drained). Resolves with true when the
 * body was read to its end, which leaves the connection in the pool, and false when it stopped at
 * the limit; rejects with the transport's error. `register` receives, at once, the function that
 * stops the exchange at the attempt's deadline: it rejects at once and aborts the request, now if
 * undici has started it or as soon as it does (a request still connecting or queued).
 *
 * The dispatcher rather than `request()`: no response stream to make and read per attempt, and no
 * AbortSignal, which together cost more than the HTTP exchange itself.
 */
function exchange(
  agent: Agent,
  options: Dispatcher.DispatchOptions,
  response: ResponseState,
  limit: number,
  register: (stop: () => void) => void,
): Promise<boolean> {
  return new Promise((resolve, reject) => {
    let capped = false;
    let settled = false;
    let stopped = false;
    let abort: (() => void) | undefined;
    const settle = (complete: boolean, error?: Error) => {
      if (settled) return;
      settled = true;
      if (error && !(error instanceof StopExchange && capped)) reject(error);
      else resolve(complete);
    };
    register(() => {
      stopped = true;
      abort?.();
      settle(false, new StopExchange('the attempt timed out'));
    });
    agent.dispatch(options, {
      onRequestStart(controller) {
        abort = () => controller.abort(new StopExchange('the attempt timed out'));
        if (stopped) abort();
      },
      onResponseStart(_controller, statusCode, headers) {
        // Informational (1xx) heads come before the real one.
        if (statusCode < 200) return;
        response.statusCode = statusCode;
        response.location = headers.location;
      },
      onResponseData(controller, chunk) {
        if (capped) return;
        response.chunks.push(chunk);
        response.size += chunk.length;
        if (response.size > limit) {
          capped = true;
          controller.abort(new StopExchange('the response body passed its limit'));
          settle(false);
        }
      },
      onResponseEnd() {
        settle(true);
      },
      onResponseError(_controller, error) {
        settle(false, error);
      },
    });
  });
}

const UTF8_BOM = [0xef, 0xbb, 0xbf];

/** The first `limit` bytes as text; `null` for an empty or absent body. */
function decodeCapped(chunks: Buffer[], limit: number): string | null {
  if (chunks.length === 0) return null;
  const all = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
  const bytes = all.subarray(0, limit);
  if (bytes.length === 0) return null;
  if (all.length > limit) {
    // stream: true holds back a multi-byte character cut at the limit instead of emitting U+FFFD.
    return new TextDecoder().decode(bytes, { stream: true });
  }
  // A whole body decodes as TextDecoder would (a leading BOM dropped), without making one.
  const bom = UTF8_BOM.every((b, i) => bytes[i] === b);
  return bytes.toString('utf8', bom ? 3 : 0);
}
