import type { Canonicalization } from '../checksum.js';
import type { KnownEventMap, KnownEventName, PayhookEvent, UnknownEvent } from '../events/types.js';
import type { CryptoPath } from '../platform.js';
import type { IdempotencyStore } from '../store/types.js';
import type { Logger } from './logger.js';
import type { ReceiverMetrics, ReceiverStats } from './metrics.js';
import type { RetryOptions } from './retry.js';
import type { TracingOption } from './tracing.js';

/** Options of {@link createReceiver}; validated at creation (a TypeError names the bad value). */
export interface ReceiverOptions {
  /** The id of the business that receives, or several (key rotation, platforms). */
  businessIds: string | readonly string[];
  /** Addresses and CIDRs (v4 and v6) events may come from. Required unless `allowAnyIp` is true. */
  allowedIps?: readonly string[];
  /** Accept events from any address. The checksum key is not a strong secret: see the threat model. */
  allowAnyIp?: boolean;
  /**
   * Proxies (addresses or CIDRs) whose X-Forwarded-For is trusted; the client address is the first
   * one from the right that is not a trusted proxy. Without it, the framework's own client address.
   */
  trustedProxies?: readonly string[];
  /**
   * Standard Webhooks secrets (`whsec_...`) this receiver verifies `webhook-signature` with; during
   * a rotation, the new one and the previous one. With secrets, a request must carry a valid
   * signature with a timestamp within the tolerance (unless `allowUnsigned`), and its checksum
   * must verify too.
   */
  signingSecrets?: readonly string[];
  /**
   * Standard Webhooks Ed25519 public keys (`whpk_...`) this receiver verifies `v1a` signatures
   * with; several during a rotation, any one verifying passes. A receiver holding only public keys
   * holds nothing that can sign. With `signingSecrets` too, a `v1` or a `v1a` signature passes.
   */
  signingPublicKeys?: readonly string[];
  /**
   * Which implementation verifies checksums and signatures: `auto` (default) takes node:crypto
   * where the runtime has it (synchronous, the fast path) and Web Crypto elsewhere (browsers,
   * Workers without nodejs_compat); `web` forces Web Crypto, `node` requires node:crypto.
   */
  crypto?: CryptoPath;
  /**
   * With `signingSecrets` or `signingPublicKeys`, also accept requests without signature headers,
   * on their checksum alone (default false: they are refused, 401 `signature_required`). For a
   * migration period, while some sender does not sign yet; the receiver warns at creation. Without
   * secrets or public keys it changes nothing: every request is taken on its checksum.
   */
  allowUnsigned?: boolean;
  /**
   * Deprecated: a receiver with `signingSecrets` or `signingPublicKeys` requires a signature by
   * default. `true` restates it (and still needs a secret or public key); `false` with them is the
   * older spelling of `allowUnsigned: true`, with its warning.
   *
   * @deprecated Leave it out to require signatures; write `allowUnsigned: true` to accept unsigned events.
   */
  requireSignature?: boolean;
  /** Largest distance between `webhook-timestamp` and this receiver's clock, either way (default 300 s). */
  signatureToleranceSeconds?: number;
  /** Default `auto` with a raw body; a parsed body (a body parser ran first) always uses `jcs`. */
  canonicalization?: Canonicalization;
  /** Largest body accepted, in bytes (default 1 MiB). */
  maxBodyBytes?: number;
  /**
   * The most of a body over `maxBodyBytes` that is still read (and thrown away) before its
   * connection closes, counting the whole body (default 32 MiB, or twice `maxBodyBytes` if
   * larger; 0 closes at once), so that a client that writes its whole body before reading sees
   * the 413 rather than a reset. 0, or at least `maxBodyBytes`.
   */
  maxDrainBytes?: number;
  /** Deepest nesting accepted in a body (default 64). */
  maxDepth?: number;
  /** Idempotency store shared by every instance (default: `createMemoryStore()`). */
  store?: IdempotencyStore;
  /** Lease on an event being processed, renewed while its handler runs (default: the store's, or 30 s). */
  leaseMs?: number;
  /** How often this instance looks for events whose owner died (default 10 s; 0 turns it off). */
  recoveryIntervalMs?: number;
  /** Events processed at once (default 10). */
  concurrency?: number;
  /** Time allowed to one run of an event's handlers (default 30 s). */
  handlerTimeoutMs?: number;
  /** Local retries of a failing handler. */
  retry?: RetryOptions;
  /**
   * Most events held at once, acknowledged but not finished (being claimed, queued or running;
   * default 1,000). Past it a request is answered 503 `queue_full` with `Retry-After`, and
   * nothing is recorded, so the sender's retry brings the event back.
   */
  maxQueuedEvents?: number;
  /**
   * Most body bytes held at once over the same events (default 16 MiB). One event alone is
   * always taken, whatever its size, up to `maxBodyBytes`.
   */
  maxQueuedBytes?: number;
  /**
   * A pino-compatible logger. Default: warnings and errors on stderr (`stderrLogger`), so an
   * event acknowledged but not handled is never silent; pass `silentLogger` to print nothing.
   */
  logger?: Logger;
  /**
   * Callbacks that count what the receiver does, for prom-client, OpenTelemetry metrics or StatsD:
   * `onReceived` (each request's outcome), `onHandled` (each run of an event's handlers),
   * `onRetry`, `onDeadLetter`, `onStale`. One that throws is logged once and never breaks a request.
   */
  metrics?: ReceiverMetrics;
  /**
   * OpenTelemetry spans around handler runs, children of the request's `traceparent`. Default: on
   * when `@opentelemetry/api` is installed (a no-op until an SDK is registered); `false` turns it
   * off; `{ tracer }` uses that tracer.
   */
  tracing?: TracingOption;
  /** Token of this instance in the store (default: a random UUID). */
  instanceId?: string;
  /**
   * Per-object order (default on, with a store that keeps it: the memory and Redis stores). The
   * events of one object, by default one payment session, never run at once, on this instance or
   * any other on the same store; and an event older in the object's lifecycle than one already
   * handled (a `created` after its `succeeded`, ranked by `EVENT_RANKS` and `orderRank`) does not
   * reach its handlers: it goes to `onStale`, is counted (`stats().stale`, `metrics.onStale`) and
   * marked done. Waiting for an object's turn holds no worker. `false` turns it off. A store
   * without it is refused when an order option is given, and named in an info line otherwise.
   */
  order?: boolean;
  /**
   * The object an event belongs to, for per-object order; undefined leaves the event unordered.
   * Default `defaultOrderKey`: the payment session's id (`data.id`) of a known event, and no
   * object for an event payhook does not know.
   *
   * @example
   * ```ts
   * orderKey: (event) => (event.event.startsWith('payment.refund.') ? `refund:${(event.data as { id: string }).id}` : defaultOrderKey(event))
   * ```
   */
  orderKey?: (event: PayhookEvent) => string | undefined;
  /**
   * The rank of an event in its object's lifecycle, for per-object order: an event ranked below
   * one already handled for its object is stale. Undefined falls back to `EVENT_RANKS` (known
   * events); an event with no rank is never stale and raises no rank, though it still waits for
   * its object's turn.
   */
  orderRank?: (event: PayhookEvent) => number | undefined;
}

/**
 * What an adapter hands to {@link Receiver.handle}: these fields only (another one is refused with
 * a TypeError rather than ignored).
 */
export interface ReceiverRequest {
  method: string;
  /** The Content-Type header; the key is required, its value undefined when the request has none. */
  contentType: string | undefined;
  /** The socket's peer address. */
  remoteAddress: string | undefined;
  /**
   * The framework's own resolution of the client address (`req.ip`, `ctx.ip`, `request.ip`, which
   * follow its trust-proxy setting). Used unless the receiver has `trustedProxies`.
   */
  clientIp?: string | undefined;
  /**
   * The request's headers, lower-case names (Node's `req.headers`); the receiver reads the
   * Standard Webhooks ones (`webhook-id`, `webhook-timestamp`, `webhook-signature`).
   */
  headers?: Readonly<Record<string, string | readonly string[] | undefined>>;
  /** X-Forwarded-For, used only with `trustedProxies`. */
  forwardedFor?: string | readonly string[] | undefined;
  /** The body as received (preferred: enables lexical canonicalization and duplicate-key checks). */
  rawBody?: string | Uint8Array | undefined;
  /** Reads the raw body, called only once the cheap checks passed; may reject with a 413 PayhookError. */
  readBody?: ((maxBytes: number, maxDrainBytes?: number) => Promise<string | Uint8Array>) | undefined;
  /** A body a framework parser already produced (then `jcs` applies and duplicate keys are invisible). */
  parsedBody?: unknown;
}

/** What the adapter writes back, and the work it starts once the response is written. */
export interface ReceiverResult {
  status: number;
  body: Record<string, unknown>;
  headers: Record<string, string>;
  /** Enqueues the accepted event; call it after the response is written (see `runAfterResponse`). */
  afterResponse?: () => void;
  /**
   * Of an accepted event: resolves, never rejects, once its processing on this instance has ended
   * and its outcome is recorded. For an adapter that must hold a serverless instance alive while
   * the handlers run (`waitUntil(result.processed())`) or answer only after them. Call it with
   * `afterResponse`, in the same turn (the work starts on a later one); called once the event is
   * no longer held here, it resolves `not_held`.
   */
  processed?: () => Promise<ProcessedEvent>;
}

/**
 * How the processing of an accepted event ended on this instance: `done` (its handlers
 * succeeded), `failed` (they failed after every local retry; recorded as failed and
 * dead-lettered, and `error` is the last failure), `taken_over` (its lease passed to another
 * instance, which runs it), or `not_held` (this instance no longer held it when asked).
 */
export type ProcessedEvent =
  | { outcome: 'done' }
  | { outcome: 'failed'; error: unknown }
  | { outcome: 'taken_over' }
  | { outcome: 'not_held' };

/** Passed to every handler with the event. */
export interface HandlerContext {
  /** Idempotency key: business id + lower-cased checksum. Use it as your own dedupe key. */
  key: string;
  businessId: string;
  /** Which local attempt this is (1 for the first). */
  attempt: number;
  /** Aborted when the handler timeout passes: stop work that no longer counts. */
  signal: AbortSignal;
  /**
   * The open transaction this attempt runs in, when the store runs handlers in transactions
   * (`@payhook/postgres`: a `pg` client of the store's pool, inside `BEGIN`); undefined with other
   * stores. What a handler writes through it commits together with the event's done mark, or not
   * at all. Typed `unknown` here: the store's package gives it its type (`pgTransaction(context)`).
   */
  transaction?: unknown;
}

/**
 * A handler of events of type `E`, given the event and its {@link HandlerContext}. It runs after
 * the 200, from the receiver's queue; a throw or a rejection fails the run, which is retried.
 *
 * @example
 * ```ts
 * const onSucceeded: EventHandler<PaymentSessionSucceededEvent> = async (event, { key, signal }) => {
 *   await markOrderPaid(event.data.reference, { dedupeKey: key, signal });
 * };
 * receiver.on('payment.session.succeeded', onSucceeded);
 * ```
 */
export type EventHandler<E> = (event: E, context: HandlerContext) => unknown;

/** An authentic event that is unknown or fails validation. */
export interface UnrecognizedEvent {
  event: UnknownEvent;
  reason: 'unknown_event' | 'invalid_data' | 'not_an_event';
  issues: readonly { path: string; message: string }[];
}

/** An event whose handlers failed after every local retry. */
export interface DeadLetter {
  key: string;
  event: PayhookEvent;
  error: unknown;
  attempts: number;
}

/** Where an error came from, for `onError`. */
export interface ErrorInfo {
  key?: string;
  attempt?: number;
  phase: 'handler' | 'store' | 'request' | 'recovery' | 'callback';
}

/**
 * What `receiver.replay(key)` did: `replayed` (the dead-lettered event ran again), `not_found`
 * (the store holds no such key), or `not_failed` with the state the event is in.
 *
 * @example
 * ```ts
 * const result = await receiver.replay(letter.key);
 * if (result.status !== 'replayed') console.warn(`not replayed: ${result.status}`);
 * ```
 */
export type ReplayResult =
  | { status: 'replayed' }
  | { status: 'not_found' }
  | { status: 'not_failed'; state: 'processing' | 'done' };

/**
 * `Name` unless payhook knows it: a known name given to `onUnknown` is a type error, whose
 * message (this text, as the expected type) says what to write instead.
 */
type NotKnown<Name extends string> = Name extends KnownEventName
  ? `${Name} is a known event: use receiver.on('${Name}', handler)`
  : Name;

/** A webhook receiver: verifies, acknowledges, and processes each event once. */
export interface Receiver {
  /**
   * Handles events of one known name (or several), typed by name. Only the names payhook knows
   * compile, so a misspelling is a type error; a name passed anyway (JavaScript, a cast) is
   * registered and warned about through the logger, with the known name it is closest to. For an
   * event payhook does not know yet, use {@link Receiver.onUnknown}; for every event, `onAny`.
   *
   * @example
   * ```ts
   * receiver.on('payment.session.succeeded', (event) => markPaid(event.data.id, event.data.amount));
   * receiver.on(['payment.session.created', 'payment.session.failed'], (event) => audit(event.event));
   * ```
   */
  on<const Name extends KnownEventName>(
    name: Name | readonly Name[],
    handler: EventHandler<KnownEventMap[Name]>,
  ): Receiver;
  /**
   * Handles events of a name payhook does not know yet (the service may add events; an unknown
   * event with a valid checksum is authentic and acknowledged). The event comes as received,
   * `data: unknown`, for you to validate; a known name is a type error here (use `on`). Such an
   * event also reaches `onUnrecognized` (reason `unknown_event`) and `onAny`.
   *
   * @example
   * ```ts
   * receiver.onUnknown('payment.refund.created', (event) => refunds.record(event.data));
   * ```
   */
  onUnknown<const Name extends string>(
    name: NotKnown<Name> | readonly NotKnown<Name>[],
    handler: EventHandler<UnknownEvent>,
  ): Receiver;
  /** Handles every authentic event, known or not: the catch-all. */
  onAny(handler: EventHandler<PayhookEvent>): Receiver;
  /**
   * Handles authentic events that no typed handler can take: an unknown name, or a known name whose
   * data fails validation; with the reason and the issues.
   */
  onUnrecognized(handler: EventHandler<UnrecognizedEvent>): Receiver;
  /** Called with every error: handler failures (each attempt), store errors, refused requests. */
  onError(handler: (error: unknown, info: ErrorInfo) => void): Receiver;
  /** Called when an event's handlers failed after every local retry; the payload is kept for `replay`. */
  onDeadLetter(handler: (letter: DeadLetter) => unknown): Receiver;
  /**
   * Handles stale events, under per-object order: an event older in its object's lifecycle than
   * one already handled (a `payment.session.created` after its `succeeded`). Such an event never
   * reaches `on`, `onAny` or `onUnrecognized`; it runs here, one at a time with its object's
   * other events, with the timeout and retries of any handler, and is marked done. Without a
   * stale handler it is only logged and counted. Never called when `order` is false.
   *
   * @example
   * ```ts
   * receiver.onStale((event, { key }) => audit.record('stale', event.event, key));
   * ```
   */
  onStale(handler: EventHandler<PayhookEvent>): Receiver;
  /**
   * Runs the pipeline on one request. Adapters call it. Rejects with a TypeError, as a bug, on a
   * request object with a field {@link ReceiverRequest} does not have (the message names it and
   * lists those accepted), without `method`, or without the `contentType` key.
   */
  handle(request: ReceiverRequest): Promise<ReceiverResult>;
  /** Processes a dead-lettered event again. */
  replay(key: string): Promise<ReplayResult>;
  /** Claims and processes events whose owner died; returns how many. Runs at start and on a timer. */
  recover(): Promise<number>;
  /**
   * The work this instance holds, counted now: for gauges read when a collector scrapes (the
   * queue's depth is `queued`).
   *
   * @example
   * ```ts
   * new Gauge({ name: 'payhook_queued_events', help: 'Events waiting for a worker', collect() { this.set(receiver.stats().queued); } });
   * ```
   */
  stats(): ReceiverStats;
  /** Resolves when nothing is being claimed, queued or running (call `afterResponse` first). */
  idle(): Promise<void>;
  /**
   * Stops intake (503 `shutting_down`) and resolves once every request answered 200 has been
   * processed and its outcome recorded, whatever the interleaving: claims in flight are
   * decided, and accepted events are started even if their response was not written yet.
   */
  close(): Promise<void>;
  readonly instanceId: string;
  readonly maxBodyBytes: number;
  readonly maxDrainBytes: number;
  readonly logger: Logger;
}
