// Spans of the delivery path through @opentelemetry/api: a no-op until the application registers
// an SDK (a tracer provider, and a propagator for the opt-in traceparent header).
import {
  type Attributes,
  type Link,
  propagation,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { VERSION } from '../version.js';
import type { AttemptOutcome } from './attempt-outcome.js';
import type { Claim } from './delivery-state.js';
import { outcomeLabel } from './metrics.js';

/** The instrumentation scope of every span the sender makes. */
export const TRACER_NAME = '@payhook/sender';

/**
 * The sender's tracer, asked of the global provider at each use: an SDK registered after the
 * sender started (or replaced in a test) is the one used.
 */
export function tracer(): Tracer {
  return trace.getTracer(TRACER_NAME, VERSION);
}

/**
 * A URL as a span may show it: credentials and every query value replaced by `REDACTED` (webhook
 * URLs often carry a token in their query), the fragment dropped.
 *
 * @example
 * ```ts
 * redactUrl('https://merchant.example/hooks?token=abc'); // 'https://merchant.example/hooks?token=REDACTED'
 * ```
 */
export function redactUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'REDACTED';
  }
  if (parsed.username) parsed.username = 'REDACTED';
  if (parsed.password) parsed.password = 'REDACTED';
  parsed.hash = '';
  if (parsed.search) {
    const query = [...parsed.searchParams.keys()].map((key) => `${encodeURIComponent(key)}=REDACTED`);
    parsed.search = query.join('&');
  }
  return parsed.href;
}

/**
 * The URL attributes of each URL attempted lately: parsed once, not twice at every attempt
 * (attempts go to few URLs, and cost that whether or not an SDK records the span).
 */
const urlAttributeCache = new Map<string, Attributes>();

/** `url.full` (redacted), `server.address` and `server.port` of a webhook URL. */
function urlAttributes(url: string): Attributes {
  let attributes = urlAttributeCache.get(url);
  if (attributes) return attributes;
  attributes = { 'url.full': redactUrl(url) };
  try {
    const parsed = new URL(url);
    attributes['server.address'] = parsed.hostname.replace(/^\[|\]$/g, '');
    attributes['server.port'] = Number(parsed.port || (parsed.protocol === 'https:' ? 443 : 80));
  } catch {
    // An unparsable URL fails the attempt at its check: the span says so at its end.
  }
  if (urlAttributeCache.size >= 1024) urlAttributeCache.clear();
  urlAttributeCache.set(url, attributes);
  return attributes;
}

/** The claim span each claimed delivery came from: its attempt span links to it. */
const claimSpans = new WeakMap<Claim, SpanContext>();

/**
 * Runs one claim statement under an INTERNAL span `payhook.delivery.claim`, with the number of rows
 * asked for and claimed (and moved, when a backlog was paced). A claim that throws ends the span
 * with an error status.
 *
 * @example
 * ```ts
 * const result = await traceClaim(limit, () => claimDeliveries(db, options), (r) => r.claims, (r) => r.paced.size);
 * ```
 */
export async function traceClaim<T>(
  limit: number,
  run: () => Promise<T>,
  claimsOf: (result: T) => readonly Claim[],
  movedOf: (result: T) => number,
): Promise<T> {
  const span = tracer().startSpan(
    'payhook.delivery.claim',
    { kind: SpanKind.INTERNAL, attributes: { 'payhook.claim.limit': limit } },
    ROOT_CONTEXT,
  );
  try {
    const result = await run();
    const claims = claimsOf(result);
    span.setAttributes({ 'payhook.claim.rows': claims.length, 'payhook.claim.moved': movedOf(result) });
    if (span.isRecording()) {
      const context = span.spanContext();
      for (const claim of claims) claimSpans.set(claim, context);
    }
    return result;
  } catch (error) {
    span.recordException(error as Error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
    throw error;
  } finally {
    span.end();
  }
}

/** An attempt's span, begun before its request is sent. */
export interface AttemptSpan {
  /** The `traceparent` (and `tracestate`) of the span, when asked for and an SDK propagates. */
  headers: Record<string, string>;
  /** Ends the span with what came back. */
  end(outcome: AttemptOutcome): void;
}

/**
 * Begins the CLIENT span of one attempt (`POST`, after the HTTP client conventions): `url.full`
 * redacted, `server.address` and `server.port`, `payhook.attempt` (1 for the first) and, on a
 * retry, `http.request.resend_count`; linked to the claim that took the delivery. With
 * `traceparent`, the span's context is injected with the global propagator into `headers`, for the
 * receiver to continue the trace.
 *
 * @example
 * ```ts
 * const span = beginAttemptSpan(claim, true);
 * const outcome = await client.send({ url: claim.url, body: claim.payload, headers: span.headers });
 * span.end(outcome);
 * ```
 */
export function beginAttemptSpan(claim: Claim, traceparent: boolean): AttemptSpan {
  const attributes: Attributes = {
    'http.request.method': 'POST',
    ...urlAttributes(claim.url),
    'payhook.attempt': claim.attempts + 1,
    'payhook.delivery.id': claim.id,
    'payhook.event.id': claim.event_id,
  };
  if (claim.attempts > 0) attributes['http.request.resend_count'] = claim.attempts;
  const claimed = claimSpans.get(claim);
  const links: Link[] = claimed ? [{ context: claimed }] : [];
  const span: Span = tracer().startSpan('POST', { kind: SpanKind.CLIENT, attributes, links }, ROOT_CONTEXT);
  const headers: Record<string, string> = {};
  // The span's own context, not the active one: nothing else of the process (baggage) goes out.
  if (traceparent) propagation.inject(trace.setSpan(ROOT_CONTEXT, span), headers);
  return {
    headers,
    end(outcome) {
      if (outcome.statusCode !== null) span.setAttribute('http.response.status_code', outcome.statusCode);
      span.setAttribute('payhook.outcome', outcomeLabel(outcome));
      if (!outcome.ok) {
        span.setAttribute('error.type', outcome.error?.code ?? 'failed');
        span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.error?.message ?? 'failed' });
      }
      span.end();
    },
  };
}
