import { randomUUID } from 'node:crypto';
import PQueue from 'p-queue';
import { type Canonicalization, type SignedPayload, verifyChecksum } from '../checksum.js';
import { isPayhookError, PayhookError } from '../errors.js';
import { parseEvent } from '../events/parse-event.js';
import type { EventOf, PayhookEvent, UnknownEvent } from '../events/types.js';
import { createIpAllowList, type IpAllowList, resolveClientIp } from '../ip.js';
import { DEFAULT_MAX_DEPTH } from '../lexical-canonical-json.js';
import { createMemoryStore } from '../store/memory-store.js';
import type { IdempotencyStore } from '../store/types.js';
import { isJsonContentType } from './content-type.js';
import { type Logger, silentLogger } from './logger.js';
import { tooLarge } from './read-body.js';
import { type RetryOptions, resolveRetry, retryDelay } from './retry.js';

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
  /** Default `auto` with a raw body; a parsed body (a body parser ran first) always uses `jcs`. */
  canonicalization?: Canonicalization;
  /** Largest body accepted, in bytes (default 1 MiB). */
  maxBodyBytes?: number;
  /** Deepest nesting accepted in a body (default 64). */
  maxDepth?: number;
  /** Idempotency store shared by every instance (default: `createMemoryStore()`). */
  store?: IdempotencyStore;
  /** Lease on an event being processed, renewed while its handler runs (default 30 s). */
  leaseMs?: number;
  /** How often this instance looks for events whose owner died (default 10 s; 0 turns it off). */
  recoveryIntervalMs?: number;
  /** Events processed at once (default 10). */
  concurrency?: number;
  /** Time allowed to one run of an event's handlers (default 30 s). */
  handlerTimeoutMs?: number;
  /** Local retries of a failing handler. */
  retry?: RetryOptions;
  /** A pino-compatible logger (default: silent). */
  logger?: Logger;
  /** Token of this instance in the store (default: a random UUID). */
  instanceId?: string;
}

/** What an adapter hands to {@link Receiver.handle}. */
export interface ReceiverRequest {
  method: string;
  contentType: string | undefined;
  /** The socket's peer address. */
  remoteAddress: string | undefined;
  /**
   * The framework's own resolution of the client address (`req.ip`, `ctx.ip`, `request.ip`, which
   * follow its trust-proxy setting). Used unless the receiver has `trustedProxies`.
   */
  clientIp?: string | undefined;
  /** X-Forwarded-For, used only with `trustedProxies`. */
  forwardedFor?: string | readonly string[] | undefined;
  /** The body as received (preferred: enables lexical canonicalization and duplicate-key checks). */
  rawBody?: string | Uint8Array | undefined;
  /** Reads the raw body, called only once the cheap checks passed; may reject with a 413 PayhookError. */
  readBody?: ((maxBytes: number) => Promise<string | Uint8Array>) | undefined;
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
}

/** Passed to every handler with the event. */
export interface HandlerContext {
  /** Idempotency key: business id + lower-cased checksum. Use it as your own dedupe key. */
  key: string;
  businessId: string;
  /** Which local attempt this is (1 for the first). */
  attempt: number;
  /** Aborted when the handler timeout passes: stop work that no longer counts. */
  signal: AbortSignal;
}

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

export type ReplayResult =
  | { status: 'replayed' }
  | { status: 'not_found' }
  | { status: 'not_failed'; state: 'processing' | 'done' };

/** A webhook receiver: verifies, acknowledges, and processes each event once. */
export interface Receiver {
  /** Handles events of one name (or several); names payhook does not know yet are typed as unknown. */
  on<const Name extends string>(name: Name | readonly Name[], handler: EventHandler<EventOf<Name>>): Receiver;
  /** Handles every authentic event, known or not. */
  onAny(handler: EventHandler<PayhookEvent>): Receiver;
  /** Handles authentic events that are unknown or fail validation. */
  onUnrecognized(handler: EventHandler<UnrecognizedEvent>): Receiver;
  /** Called with every error: handler failures (each attempt), store errors, refused requests. */
  onError(handler: (error: unknown, info: ErrorInfo) => void): Receiver;
  /** Called when an event's handlers failed after every local retry; the payload is kept for `replay`. */
  onDeadLetter(handler: (letter: DeadLetter) => unknown): Receiver;
  /** Runs the pipeline on one request. Adapters call it. */
  handle(request: ReceiverRequest): Promise<ReceiverResult>;
  /** Processes a dead-lettered event again. */
  replay(key: string): Promise<ReplayResult>;
  /** Claims and processes events whose owner died; returns how many. Runs at start and on a timer. */
  recover(): Promise<number>;
  /** Resolves when nothing is queued or running. */
  idle(): Promise<void>;
  /** Stops intake (503 `shutting_down`) and drains what was accepted. */
  close(): Promise<void>;
  readonly instanceId: string;
  readonly maxBodyBytes: number;
  readonly logger: Logger;
}

const DEFAULT_MAX_BODY = 1024 * 1024;

interface Job {
  key: string;
  payload: SignedPayload;
  businessId: string;
}

function positive(name: string, value: number | undefined, fallback: number, allowZero = false): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || (!allowZero && value === 0)) {
    throw new TypeError(
      `Invalid ${name}: ${String(value)} (expected a ${allowZero ? 'non-negative' : 'positive'} number).`,
    );
  }
  return value;
}

/**
 * Creates a receiver: the pipeline every adapter shares. It checks the client address, the
 * method, content type and size, verifies the checksum, records the event in the idempotency
 * store, answers 200 at once, and processes the event after the response in a queue with a
 * concurrency limit, a timeout, local retries and a dead letter.
 *
 * @example
 * ```ts
 * const receiver = createReceiver({ businessIds: [process.env.BUSINESS_ID!], allowedIps: ['203.0.113.10'] });
 * receiver.on('payment.session.succeeded', async (event) => {
 *   await markOrderPaid(event.data.metadata.order.identifier, event.data.amount);
 * });
 * app.post('/webhooks', payhook(receiver)); // @payhook/express
 * ```
 */
export function createReceiver(options: ReceiverOptions): Receiver {
  if (options === null || typeof options !== 'object')
    throw new TypeError('createReceiver needs an options object.');
  const businessIds =
    typeof options.businessIds === 'string' ? [options.businessIds] : [...(options.businessIds ?? [])];
  if (businessIds.length === 0 || businessIds.some((id) => typeof id !== 'string' || id.length === 0)) {
    throw new TypeError(
      `Invalid businessIds: ${JSON.stringify(options.businessIds)} (expected one or more non-empty strings).`,
    );
  }
  let allowList: IpAllowList | undefined;
  if (options.allowAnyIp === true) {
    if (options.allowedIps !== undefined)
      throw new TypeError('Give allowedIps or allowAnyIp: true, not both.');
  } else {
    if (!Array.isArray(options.allowedIps)) {
      throw new TypeError(
        'Invalid allowedIps: a receiver needs the addresses events come from (allowedIps), or an explicit allowAnyIp: true. The checksum key is the business id, which is not a strong secret, so the allow-list is part of authenticity.',
      );
    }
    allowList = createIpAllowList(options.allowedIps);
  }
  const trustedProxies = options.trustedProxies ? createIpAllowList(options.trustedProxies) : undefined;
  const canonicalization = options.canonicalization;
  if (canonicalization !== undefined && !['auto', 'jcs', 'lexical'].includes(canonicalization)) {
    throw new TypeError(
      `Invalid canonicalization: ${String(canonicalization)} (expected "auto", "jcs" or "lexical").`,
    );
  }
  const maxBodyBytes = positive('maxBodyBytes', options.maxBodyBytes, DEFAULT_MAX_BODY);
  const maxDepth = positive('maxDepth', options.maxDepth, DEFAULT_MAX_DEPTH);
  const leaseMs = positive('leaseMs', options.leaseMs, 30_000);
  const recoveryIntervalMs = positive('recoveryIntervalMs', options.recoveryIntervalMs, 10_000, true);
  const concurrency = positive('concurrency', options.concurrency, 10);
  const handlerTimeoutMs = positive('handlerTimeoutMs', options.handlerTimeoutMs, 30_000);
  const retry = resolveRetry(options.retry);
  const logger = options.logger ?? silentLogger;
  const store = options.store ?? createMemoryStore();
  const instanceId = options.instanceId ?? randomUUID();

  const handlers = new Map<string, EventHandler<never>[]>();
  const anyHandlers: EventHandler<PayhookEvent>[] = [];
  const unrecognizedHandlers: EventHandler<UnrecognizedEvent>[] = [];
  const errorHandlers: ((error: unknown, info: ErrorInfo) => void)[] = [];
  const deadLetterHandlers: ((letter: DeadLetter) => unknown)[] = [];
  const queue = new PQueue({ concurrency });
  let closing = false;
  let warnedParsed = false;

  const reportError = (error: unknown, info: ErrorInfo) => {
    logger.error({ err: error, ...info }, 'payhook: error');
    for (const handler of errorHandlers) {
      try {
        handler(error, info);
      } catch (callbackError) {
        logger.error({ err: callbackError }, 'payhook: onError handler threw');
      }
    }
  };

  const refuse = (error: PayhookError, headers: Record<string, string> = {}): ReceiverResult => ({
    status: error.status,
    body: error.toJSON() as unknown as Record<string, unknown>,
    headers,
  });

  async function runHandlers(job: Job, context: HandlerContext): Promise<void> {
    const parsed = parseEvent(job.payload);
    const calls: Promise<unknown>[] = [];
    const call = (fn: () => unknown) => calls.push(Promise.resolve().then(fn));
    const event = (parsed.kind === 'known' ? parsed.event : job.payload) as PayhookEvent;
    for (const handler of handlers.get(job.payload.event) ?? [])
      call(() => (handler as EventHandler<PayhookEvent>)(event, context));
    for (const handler of anyHandlers) call(() => handler(event, context));
    if (parsed.kind === 'unrecognized') {
      const info: UnrecognizedEvent = {
        event: job.payload as UnknownEvent,
        reason: parsed.reason,
        issues: parsed.issues,
      };
      for (const handler of unrecognizedHandlers) call(() => handler(info, context));
    }
    const results = await Promise.allSettled(calls);
    const failures = results
      .filter((r): r is PromiseRejectedResult => r.status === 'rejected')
      .map((r) => r.reason);
    if (failures.length === 1) throw failures[0];
    if (failures.length > 1)
      throw new AggregateError(failures, `${failures.length} handlers failed for ${job.payload.event}`);
  }

  async function attempt(job: Job, n: number): Promise<void> {
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const error = new PayhookError(
          'handler_timeout',
          `The handlers of ${job.payload.event} did not finish within ${handlerTimeoutMs} ms.`,
        );
        controller.abort(error);
        reject(error);
      }, handlerTimeoutMs);
    });
    try {
      await Promise.race([
        runHandlers(job, { key: job.key, businessId: job.businessId, attempt: n, signal: controller.signal }),
        timeout,
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  // Keys this instance claimed and has not finished: claimed, queued or running.
  const inFlight = new Set<string>();
  // Leases of the events being processed, renewed together by one timer rather than one per event.
  const held = new Map<string, { lost: boolean }>();
  let renewalTimer: NodeJS.Timeout | undefined;
  const renewAll = () => {
    for (const [key, lease] of held) {
      store.renew(key, instanceId, leaseMs).then(
        (ok) => {
          if (!ok) lease.lost = true;
        },
        (error) => reportError(error, { key, phase: 'store' }),
      );
    }
  };
  const hold = (key: string) => {
    const lease = { lost: false };
    held.set(key, lease);
    if (renewalTimer === undefined) {
      renewalTimer = setInterval(renewAll, Math.max(10, Math.floor(leaseMs / 3)));
      renewalTimer.unref();
    }
    return lease;
  };
  const release = (key: string) => {
    held.delete(key);
    if (held.size === 0 && renewalTimer !== undefined) {
      clearInterval(renewalTimer);
      renewalTimer = undefined;
    }
  };

  async function process(job: Job): Promise<void> {
    const lease = hold(job.key);
    let lastError: unknown;
    let attempts = 0;
    try {
      for (let n = 1; n <= retry.attempts; n++) {
        attempts = n;
        try {
          await attempt(job, n);
          lastError = undefined;
          break;
        } catch (error) {
          lastError = error;
          reportError(error, { key: job.key, attempt: n, phase: 'handler' });
          if (n < retry.attempts && !lease.lost) await sleep(retryDelay(n, retry));
        }
      }
    } finally {
      release(job.key);
    }
    if (lastError === undefined) {
      await record(() => store.complete(job.key, instanceId), job.key);
      logger.debug({ key: job.key, event: job.payload.event }, 'payhook: event processed');
      return;
    }
    await record(() => store.fail(job.key, instanceId, describe(lastError)), job.key);
    const letter: DeadLetter = {
      key: job.key,
      event: job.payload as PayhookEvent,
      error: lastError,
      attempts,
    };
    logger.warn({ key: job.key, event: job.payload.event, attempts }, 'payhook: event dead-lettered');
    for (const handler of deadLetterHandlers) {
      try {
        await handler(letter);
      } catch (error) {
        reportError(error, { key: job.key, phase: 'callback' });
      }
    }
  }

  /**
   * Records an event's outcome. If the store cannot answer, it tries again, renewing the lease
   * meanwhile, for up to a lease's length: an outcome never recorded means another instance runs
   * the handlers again once the lease lapses.
   */
  async function record(fn: () => Promise<boolean>, key: string): Promise<void> {
    const lease = hold(key);
    let failingSince: number | undefined;
    try {
      for (let retry = 1; ; retry++) {
        try {
          if (!(await fn())) {
            logger.warn(
              { key },
              'payhook: the lease on this event passed to another instance before it finished',
            );
          }
          return;
        } catch (error) {
          reportError(error, { key, phase: 'store' });
          failingSince ??= Date.now();
          if (lease.lost || Date.now() - failingSince >= leaseMs) return;
          await sleep(Math.min(2000, 25 * 2 ** retry));
        }
      }
    } finally {
      release(key);
    }
  }

  const enqueue = (job: Job) => {
    inFlight.add(job.key);
    queue
      .add(() => process(job))
      // Only once the store knows the outcome may a new delivery of this key be claimed here again.
      .finally(() => inFlight.delete(job.key))
      .catch((error) => reportError(error, { key: job.key, phase: 'handler' }));
  };

  async function recover(): Promise<number> {
    let count = 0;
    for (;;) {
      const batch = await store.recover(instanceId, leaseMs, 100);
      for (const recovered of batch) {
        try {
          enqueue({
            key: recovered.key,
            payload: JSON.parse(recovered.payload),
            businessId: recovered.businessId,
          });
          count++;
        } catch (error) {
          reportError(error, { key: recovered.key, phase: 'recovery' });
        }
      }
      if (batch.length < 100) return count;
    }
  }

  let recoveryTimer: NodeJS.Timeout | undefined;
  const runRecovery = () => {
    if (closing) return;
    recover().then(
      (n) => n > 0 && logger.info({ count: n }, 'payhook: recovered events whose owner stopped'),
      (error) => reportError(error, { phase: 'recovery' }),
    );
  };
  if (recoveryIntervalMs > 0) {
    setImmediate(runRecovery).unref?.();
    recoveryTimer = setInterval(runRecovery, recoveryIntervalMs);
    recoveryTimer.unref();
  }

  const receiver: Receiver = {
    instanceId,
    maxBodyBytes,
    logger,

    on(name, handler) {
      for (const n of typeof name === 'string' ? [name] : name) {
        if (typeof n !== 'string' || n.length === 0) throw new TypeError(`Invalid event name: ${String(n)}`);
        const list = handlers.get(n) ?? [];
        list.push(handler as EventHandler<never>);
        handlers.set(n, list);
      }
      return receiver;
    },
    onAny(handler) {
      anyHandlers.push(handler);
      return receiver;
    },
    onUnrecognized(handler) {
      unrecognizedHandlers.push(handler);
      return receiver;
    },
    onError(handler) {
      errorHandlers.push(handler);
      return receiver;
    },
    onDeadLetter(handler) {
      deadLetterHandlers.push(handler);
      return receiver;
    },

    async handle(request) {
      if (closing) {
        return refuse(
          new PayhookError('shutting_down', 'The receiver is shutting down; send the event again.'),
          {
            'retry-after': '5',
          },
        );
      }
      const clientIp = trustedProxies
        ? resolveClientIp({
            remoteAddress: request.remoteAddress,
            forwardedFor: request.forwardedFor,
            trustedProxies,
          })
        : resolveClientIp({ remoteAddress: request.clientIp ?? request.remoteAddress });
      if (allowList && (clientIp === undefined || !allowList.contains(clientIp))) {
        logger.warn({ ip: clientIp }, 'payhook: request from an address outside the allow-list refused');
        return refuse(
          new PayhookError(
            'ip_not_allowed',
            `Requests from ${clientIp ?? 'an unknown address'} are not accepted.`,
          ),
        );
      }
      if (request.method.toUpperCase() !== 'POST') {
        return refuse(new PayhookError('method_not_allowed', 'Webhook events are sent with POST.'), {
          allow: 'POST',
        });
      }
      if (!isJsonContentType(request.contentType)) {
        return refuse(
          new PayhookError(
            'unsupported_media_type',
            'Webhook events are JSON: send Content-Type: application/json.',
          ),
        );
      }
      let rawBody = request.rawBody;
      if (rawBody === undefined && request.parsedBody === undefined && request.readBody) {
        try {
          rawBody = await request.readBody(maxBodyBytes);
        } catch (error) {
          if (isPayhookError(error))
            return refuse(error, error.code === 'payload_too_large' ? { connection: 'close' } : {});
          throw error;
        }
      }
      if (
        rawBody !== undefined &&
        (typeof rawBody === 'string' ? Buffer.byteLength(rawBody) : rawBody.byteLength) > maxBodyBytes
      ) {
        return refuse(tooLarge(maxBodyBytes), { connection: 'close' });
      }
      if (rawBody === undefined && !warnedParsed) {
        warnedParsed = true;
        logger.warn(
          {},
          'payhook: a body parser ran before the webhook handler, so only RFC 8785 canonicalization applies and duplicate keys go unseen; mount payhook before the body parser for full protection',
        );
      }
      const verified = verifyChecksum(rawBody !== undefined ? { rawBody } : { payload: request.parsedBody }, {
        businessIds,
        canonicalization: rawBody !== undefined ? canonicalization : 'jcs',
        maxDepth,
      });
      if (!verified.ok) {
        logger.warn(
          { code: verified.error.code, ip: clientIp },
          `payhook: event refused: ${verified.error.message}`,
        );
        return refuse(verified.error);
      }
      const key = `${verified.businessId}:${verified.payload.checksum.toLowerCase()}`;
      if (inFlight.has(key)) {
        // This instance holds it already: a duplicate, whatever the store would say of its own owner.
        return { status: 200, body: { received: true, duplicate: true }, headers: {} };
      }
      let claim: Awaited<ReturnType<IdempotencyStore['claim']>>;
      try {
        claim = await store.claim(key, {
          owner: instanceId,
          leaseMs,
          // The body as received, so another instance processes the very bytes that were verified.
          payload:
            rawBody === undefined
              ? JSON.stringify(verified.payload)
              : typeof rawBody === 'string'
                ? rawBody
                : Buffer.from(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength).toString('utf8'),
          businessId: verified.businessId,
        });
      } catch (error) {
        reportError(error, { key, phase: 'store' });
        return refuse(
          new PayhookError(
            'store_unavailable',
            'The idempotency store did not answer; the event was not recorded, send it again.',
            {
              cause: error,
            },
          ),
          { 'retry-after': '5' },
        );
      }
      if (claim.status === 'duplicate') {
        logger.debug({ key, state: claim.state }, 'payhook: duplicate delivery acknowledged');
        return { status: 200, body: { received: true, duplicate: true }, headers: {} };
      }
      const job: Job = { key, payload: verified.payload, businessId: verified.businessId };
      inFlight.add(key);
      return {
        status: 200,
        body: { received: true },
        headers: {},
        afterResponse: () => enqueue(job),
      };
    },

    async replay(key) {
      const record = await store.get(key);
      if (!record) return { status: 'not_found' };
      if (record.state !== 'failed') return { status: 'not_failed', state: record.state };
      if (record.payload === undefined) return { status: 'not_found' };
      const claim = await store.claim(key, {
        owner: instanceId,
        leaseMs,
        payload: record.payload,
        businessId: record.businessId ?? '',
      });
      if (claim.status === 'duplicate') return { status: 'not_failed', state: claim.state };
      enqueue({ key, payload: JSON.parse(record.payload), businessId: record.businessId ?? '' });
      return { status: 'replayed' };
    },

    recover,

    async idle() {
      await queue.onIdle();
    },

    async close() {
      closing = true;
      if (recoveryTimer) clearInterval(recoveryTimer);
      await queue.onIdle();
      if (!options.store) await store.close?.();
    },
  };
  return receiver;
}

function describe(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
