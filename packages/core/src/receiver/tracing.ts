import type * as NodeModule from 'node:module';
// Types only: erased from the build, so core loads without the package.
import type * as OpenTelemetryApi from '@opentelemetry/api';
import type { Context, Span, Tracer } from '@opentelemetry/api';
import { builtin } from '../platform.js';
import type { Logger } from './logger.js';

type Api = typeof OpenTelemetryApi;

/**
 * What payhook calls on a tracer: `trace.getTracer('payhook')` of `@opentelemetry/api` is one,
 * and so is a tracer from a provider that is not registered globally.
 */
export interface TracerLike {
  startSpan(name: string, options?: object, context?: object): object;
}

/**
 * The `tracing` option: default on whenever `@opentelemetry/api` can be loaded (a no-op until
 * the application registers an SDK); `false` turns it off; `true`, or `{ tracer }` to use a tracer
 * of your own, requires the package (a TypeError at creation without it).
 *
 * @example
 * ```ts
 * import { trace } from '@opentelemetry/api';
 * createReceiver({ businessIds, allowedIps, tracing: { tracer: trace.getTracer('payhook') } });
 * ```
 */
export type TracingOption = boolean | { tracer: TracerLike };

/** The request headers a handler's span is made from, kept with the queued work. */
export interface TraceCarrier {
  traceparent: string | undefined;
  tracestate: string | undefined;
  /** `payhook-attempt`: the sender's delivery attempt (for the span; never trusted). */
  attempt: string | undefined;
  /** `payhook-event-id`, or `webhook-id` (the same id). */
  eventId: string | undefined;
  /** `payhook-delivery-id`: which delivery of the event (one per URL, and per redelivery). */
  deliveryId: string | undefined;
}

let loaded: Loaded<Api> | undefined;

/** A module, or why it did not load. */
export type Loaded<T> = { module: T; error?: undefined } | { module?: undefined; error: unknown };

/**
 * Loads an optional dependency if it is installed. A require, not an import: synchronous, and
 * the same in both builds. The ESM build makes a require beside itself, so the package resolves
 * from where core is installed; in the CommonJS build `import.meta` is empty and the module's own
 * `require` does it. (Testing `typeof require` instead fails: the ESM build's bundler puts a
 * function of its own there, which throws on every call.)
 */
export function loadOptional<T>(name: string): Loaded<T> {
  try {
    const url: string | undefined = import.meta.url;
    // node:module through the runtime, not an import: a browser or Worker bundle loads without
    // it. There nothing can be required: the package reads as not installed.
    const createRequire = builtin<typeof NodeModule>('module')?.createRequire;
    if (createRequire === undefined) {
      const error = new Error(`${name} cannot be required on this runtime.`);
      return { error: Object.assign(error, { code: 'MODULE_NOT_FOUND' }) };
    }
    const req = url ? createRequire(url) : require;
    return { module: req(name) as T };
  } catch (error) {
    return { error };
  }
}

/**
 * `@opentelemetry/api`, loaded once, if installed. A copy loaded here beside the application's
 * own (its ESM build, say) shares the application's registrations: the API keeps them on a global.
 */
export function loadOpenTelemetry(): Loaded<Api> {
  loaded ??= loadOptional<Api>('@opentelemetry/api');
  return loaded;
}

function notFound(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  return code === 'MODULE_NOT_FOUND' || code === 'ERR_MODULE_NOT_FOUND';
}

/** Checks the `tracing` option, and loads the API it needs. */
export function resolveTracing(option: TracingOption | undefined, logger: Logger): Tracing | undefined {
  if (option === false) return undefined;
  if (option !== undefined && option !== true) {
    if (option === null || typeof option !== 'object' || typeof option.tracer?.startSpan !== 'function') {
      throw new TypeError(
        `Invalid tracing: expected true, false or { tracer } with a tracer of @opentelemetry/api (trace.getTracer('payhook')).`,
      );
    }
  }
  const { module: api, error } = loadOpenTelemetry();
  if (api === undefined) {
    if (option !== undefined) {
      throw new TypeError('tracing needs @opentelemetry/api: install it beside @payhook/core.', {
        cause: error,
      });
    }
    // Installed but failing to load is worth a line; not installed is the ordinary case.
    if (!notFound(error)) logger.warn({ err: error }, 'payhook: @opentelemetry/api did not load; no tracing');
    return undefined;
  }
  const tracer = (
    option === undefined || option === true ? api.trace.getTracer('@payhook/core') : option.tracer
  ) as Tracer;
  return createTracing(api, tracer, logger);
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** One header's text; a repeated header that is not a list (`traceparent`) is not read. */
function header(value: string | readonly string[] | undefined): string | undefined {
  return typeof value === 'string' ? value : value?.length === 1 ? value[0] : undefined;
}

function createTracing(api: Api, tracer: Tracer, logger: Logger) {
  const { trace, context, propagation, SpanKind, SpanStatusCode, ROOT_CONTEXT } = api;
  // A tracer of the application's own that throws costs its spans, never a handler run: the
  // first error is logged, the run goes on without a span (or with its span left open).
  let warned = false;
  const failed = (error: unknown) => {
    if (warned) return;
    warned = true;
    logger.error({ err: error }, 'payhook: tracing threw; handlers run on, and later errors are not logged');
  };

  /**
   * The parent of a handler's span: the context in the request's `traceparent` and `tracestate`,
   * through the registered propagator; read here when none is registered (the API's default
   * propagates nothing). Always from the root context, never the one active in the worker, which
   * belongs to whichever request happened to start it.
   */
  function parent(carrier: TraceCarrier | undefined): Context {
    if (carrier?.traceparent === undefined) return ROOT_CONTEXT;
    if (propagation.fields().length > 0) return propagation.extract(ROOT_CONTEXT, carrier);
    const match = TRACEPARENT.exec(carrier.traceparent.trim());
    if (match === null) return ROOT_CONTEXT;
    const [, version, traceId = '', spanId = '', flags = '', rest] = match;
    // W3C Trace Context: version ff is invalid, version 00 has nothing after the flags, and the
    // all-zero ids are invalid.
    if (version === 'ff' || (version === '00' && rest !== undefined)) return ROOT_CONTEXT;
    if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return ROOT_CONTEXT;
    let traceState: ReturnType<Api['createTraceState']> | undefined;
    if (carrier.tracestate !== undefined && typeof api.createTraceState === 'function') {
      traceState = api.createTraceState(carrier.tracestate);
    }
    return trace.setSpanContext(ROOT_CONTEXT, {
      traceId,
      spanId,
      traceFlags: Number.parseInt(flags, 16),
      isRemote: true,
      ...(traceState ? { traceState } : {}),
    });
  }

  return {
    /** The headers a span needs, if the request has any of them: kept with the queued work. */
    capture(headers: Readonly<Record<string, string | readonly string[] | undefined>> | undefined) {
      if (headers === undefined) return undefined;
      const traceparent = header(headers.traceparent);
      const attempt = header(headers['payhook-attempt']);
      const eventId = header(headers['payhook-event-id']) ?? header(headers['webhook-id']);
      const deliveryId = header(headers['payhook-delivery-id']);
      if (
        traceparent === undefined &&
        attempt === undefined &&
        eventId === undefined &&
        deliveryId === undefined
      ) {
        return undefined;
      }
      const tracestate = headers.tracestate;
      return {
        traceparent,
        tracestate: typeof tracestate === 'string' ? tracestate : tracestate?.join(','),
        attempt,
        eventId,
        deliveryId,
      } satisfies TraceCarrier;
    },

    /**
     * Starts the span of one run of an event's handlers, and returns the context the run goes in
     * (so that the handler's own spans are its children) with the function that ends it;
     * undefined if the tracer threw.
     */
    start(event: string, key: string, attempt: number, carrier: TraceCarrier | undefined) {
      try {
        return startSpan(event, key, attempt, carrier);
      } catch (error) {
        failed(error);
        return undefined;
      }
    },

    /** Runs `fn` in `ctx`, the context of a handler's span. */
    within<T>(ctx: Context, fn: () => T): T {
      return context.with(ctx, fn);
    },
  };

  function startSpan(event: string, key: string, attempt: number, carrier: TraceCarrier | undefined) {
    const attributes: Record<string, string | number> = {
      'payhook.event.type': event,
      'payhook.event.key': key,
      'payhook.handler.attempt': attempt,
    };
    // The names the sender's attempt span uses for the same values.
    if (carrier?.eventId !== undefined) attributes['payhook.event.id'] = carrier.eventId;
    if (carrier?.deliveryId !== undefined) attributes['payhook.delivery.id'] = carrier.deliveryId;
    const delivery = carrier?.attempt === undefined ? Number.NaN : Number(carrier.attempt);
    if (Number.isSafeInteger(delivery) && delivery > 0) attributes['payhook.attempt'] = delivery;
    const from = parent(carrier);
    const span: Span = tracer.startSpan(
      `payhook.handle ${event}`,
      { kind: SpanKind.CONSUMER, attributes },
      from,
    );
    return {
      context: trace.setSpan(from, span),
      /** Ends the span: `outcome` is processed, or retrying or dead_lettered with the `error`. */
      end(outcome: 'processed' | 'retrying' | 'dead_lettered', error?: unknown) {
        try {
          span.setAttribute('payhook.outcome', outcome);
          if (outcome !== 'processed') {
            span.recordException(error instanceof Error ? error : String(error));
            span.setStatus({
              code: SpanStatusCode.ERROR,
              message: error instanceof Error ? error.message : String(error),
            });
          }
          span.end();
        } catch (spanError) {
          failed(spanError);
        }
      },
    };
  }
}

/** The tracing of a receiver's handler runs. */
export type Tracing = ReturnType<typeof createTracing>;
