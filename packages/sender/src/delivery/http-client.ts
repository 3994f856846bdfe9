// One webhook attempt over HTTP (docs/design.md, "The reference sender": delivery worker, webhook
// URLs): success is 200 exactly, redirects are failures, 5 s to connect, 15 s in all, and the
// connection only ever goes to an address that was checked to be public (no SSRF, no DNS rebinding).
import { performance } from 'node:perf_hooks';
import { Agent } from 'undici';
import { classifyAddress } from '../net/public-address.js';
import { checkWebhookUrl, type Resolver, systemResolver, type WebhookUrlCheck } from '../net/webhook-url.js';
import { type AttemptOutcome, describeError, judgeStatus } from './attempt-outcome.js';
import { decodeCapped, exchange, type ResponseState } from './exchange.js';
import { parseRetryAfter, RETRY_AFTER_STATUSES } from './retry-after.js';
import { createVettedLookup } from './vetted-lookup.js';

export type { AttemptErrorCode, AttemptOutcome } from './attempt-outcome.js';

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

const positiveInteger = (name: string, value: number | undefined, fallback: number): number => {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value <= 0) {
    throw new TypeError(`Invalid ${name}: ${value} (expected a positive integer)`);
  }
  return value;
};

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
      const retryAfter = RETRY_AFTER_STATUSES.has(statusCode) ? parseRetryAfter(response.retryAfter) : null;
      const outcome = finish({
        statusCode,
        responseBody: decodeCapped(response.chunks, maxResponseBytes),
        ...judgeStatus(host, statusCode, response.location, retryAfter),
        retryAfter,
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
