// A SERVER span per API request, through @opentelemetry/api (a no-op until the application
// registers an SDK), after the HTTP server conventions.
import { propagation, ROOT_CONTEXT, type Span, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { tracer } from '../delivery/tracing.js';

/**
 * Paths without a span: scrapes and health probes come every few seconds, and would bury the
 * requests worth reading (`/metrics` says how the sender does; `/healthz` that it answers).
 */
export const UNTRACED_PATHS: ReadonlySet<string> = new Set(['/metrics', '/healthz']);

/**
 * Adds the hooks that give every request but {@link UNTRACED_PATHS} a SERVER span: begun at
 * `onRequest` (as a child of the client's trace context, when it sent one), named `<method>
 * <route>` (the route's pattern, never the path: `GET /events/:id`), ended at `onResponse` with
 * `http.response.status_code`, and with an error status for a 5xx or a request the client
 * abandoned. Register it before the hooks whose refusals (401, 503) should have spans too.
 *
 * @example
 * ```ts
 * const app = Fastify();
 * traceRequests(app);
 * ```
 */
export function traceRequests(app: FastifyInstance): void {
  const spans = new WeakMap<FastifyRequest, Span>();
  app.addHook('onRequest', (request, _reply, done) => {
    const path = (request.url.split('?')[0] as string).replace(/(?<=.)\/$/, '');
    if (UNTRACED_PATHS.has(path)) {
      done();
      return;
    }
    const route = request.routeOptions.url;
    const parent = propagation.extract(ROOT_CONTEXT, request.headers);
    const span = tracer().startSpan(
      route ? `${request.method} ${route}` : request.method,
      {
        kind: SpanKind.SERVER,
        attributes: {
          'http.request.method': request.method,
          'url.path': path,
          'url.scheme': request.protocol,
          ...(route ? { 'http.route': route } : {}),
        },
      },
      parent,
    );
    spans.set(request, span);
    done();
  });
  app.addHook('onResponse', (request, reply, done) => {
    const span = spans.get(request);
    if (span) {
      spans.delete(request);
      span.setAttribute('http.response.status_code', reply.statusCode);
      if (reply.statusCode >= 500) {
        span.setAttribute('error.type', String(reply.statusCode));
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      span.end();
    }
    done();
  });
  app.addHook('onRequestAbort', (request, done) => {
    const span = spans.get(request);
    if (span) {
      spans.delete(request);
      span.setAttribute('error.type', 'aborted');
      span.setStatus({ code: SpanStatusCode.ERROR, message: 'the client closed the connection' });
      span.end();
    }
    done();
  });
}
