import { utf8Length } from '../bytes.js';
import { checkEnvelope, type ParsedEnvelope, parseEnvelope, type VerifyResult } from '../checksum.js';
import { digestPath } from '../digest-path.js';
import { isPayhookError, PayhookError } from '../errors.js';
import { normalizeIp } from '../ip.js';
import { createEventClaim } from './claim-event.js';
import { addressRefusal, clientAddress } from './client-address.js';
import { isJsonContentType } from './content-type.js';
import { warnIfUnknownName } from './event-names.js';
import { resolveReceiverOptions } from './options.js';
import { tooLarge } from './read-body.js';
import { checkRequestFields } from './request-fields.js';
import { refusalLogHint } from './signature-check.js';
import { type Timer, unref } from './timers.js';
import type {
  ErrorInfo,
  EventHandler,
  Receiver,
  ReceiverOptions,
  ReceiverRequest,
  ReceiverResult,
} from './types.js';
import { createWorkQueue, type HandlerRegistry } from './work-queue.js';

// Re-exported here, above createReceiver's doc comment rather than between it and the function:
// a comment followed by a re-export documents the re-export, and the declarations lose it.
export { DEFAULT_MAX_QUEUED_BYTES, DEFAULT_MAX_QUEUED_EVENTS } from './options.js';

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
 * app.use('/webhooks', payhook(receiver)); // @payhook/express
 * ```
 */
export function createReceiver(options: ReceiverOptions): Receiver {
  // The options, checked, with their defaults; the store, the logger and the metric hooks are
  // used throughout.
  const config = resolveReceiverOptions(options);
  const { store, logger, hooks } = config;

  // node:crypto verifies synchronously; the Web path (where node:crypto is missing, or asked for)
  // may answer with a promise, awaited.
  const cryptoPath = digestPath(options.crypto);
  const registry: HandlerRegistry = { byName: new Map(), any: [], unrecognized: [], deadLetter: [] };
  const errorHandlers: ((error: unknown, info: ErrorInfo) => void)[] = [];
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

  const work = createWorkQueue({ ...config, registry, reportError });
  const { recover } = work;
  const claimEvent = createEventClaim({ ...config, work, reportError });
  const duplicate = (): ReceiverResult => {
    hooks.duplicate();
    return { status: 200, body: { received: true, duplicate: true }, headers: {} };
  };
  const shuttingDown = () =>
    refuse(new PayhookError('shutting_down', 'The receiver is shutting down; send the event again.'), {
      'retry-after': '5',
    });
  const storeUnavailable = (cause?: unknown) =>
    refuse(
      new PayhookError(
        'store_unavailable',
        'The idempotency store did not answer; the event was not recorded, send it again.',
        { cause },
      ),
      { 'retry-after': '5' },
    );

  const refuse = (error: PayhookError, headers: Record<string, string> = {}): ReceiverResult => {
    hooks.refused(error.code, error.status);
    return { status: error.status, body: error.toJSON() as unknown as Record<string, unknown>, headers };
  };

  /**
   * Refuses a request that failed authentication (signature or checksum), with a warning that
   * names the option to check (signingSecrets, signingPublicKeys or businessIds).
   */
  const refuseEvent = (
    error: PayhookError,
    clientIp: string | undefined,
    headers: ReceiverRequest['headers'],
  ): ReceiverResult => {
    logger.warn(
      { code: error.code, ip: normalizeIp(clientIp) },
      `payhook: event refused: ${error.message}${refusalLogHint(error.code, options, headers)}`,
    );
    return refuse(error);
  };

  let recoveryTimer: Timer | undefined;
  const runRecovery = () => {
    if (closing) return;
    recover().then(
      (n) => n > 0 && logger.info({ count: n }, 'payhook: recovered events whose owner stopped'),
      (error) => reportError(error, { phase: 'recovery' }),
    );
  };
  if (config.recoveryIntervalMs > 0) {
    // A timer, not setImmediate, which Workers and browsers lack.
    unref(setTimeout(runRecovery, 0));
    recoveryTimer = setInterval(runRecovery, config.recoveryIntervalMs);
    unref(recoveryTimer);
  }

  /** `on` and `onUnknown`: one list per name; `on` warns about a name payhook does not know. */
  const register = (names: string | readonly string[], handler: EventHandler<never>, known: boolean) => {
    for (const n of typeof names === 'string' ? [names] : names) {
      if (typeof n !== 'string' || n.length === 0) throw new TypeError(`Invalid event name: ${String(n)}`);
      if (known) warnIfUnknownName(logger, n);
      const list = registry.byName.get(n) ?? [];
      list.push(handler);
      registry.byName.set(n, list);
    }
  };

  const receiver: Receiver = {
    instanceId: config.instanceId,
    maxBodyBytes: config.maxBodyBytes,
    maxDrainBytes: config.maxDrainBytes,
    logger,

    on(name, handler) {
      register(name, handler as EventHandler<never>, true);
      return receiver;
    },
    onUnknown(name, handler) {
      register(name, handler as EventHandler<never>, false);
      return receiver;
    },
    onAny(handler) {
      registry.any.push(handler);
      return receiver;
    },
    onUnrecognized(handler) {
      registry.unrecognized.push(handler);
      return receiver;
    },
    onError(handler) {
      errorHandlers.push(handler);
      return receiver;
    },
    onDeadLetter(handler) {
      registry.deadLetter.push(handler);
      return receiver;
    },
    onStale(handler) {
      if (typeof handler !== 'function') throw new TypeError('onStale needs a handler function.');
      config.order?.staleHandlers.push(handler);
      return receiver;
    },

    async handle(request) {
      checkRequestFields(request);
      if (closing) return shuttingDown();
      const clientIp = clientAddress(request, config.trustedProxies);
      const refusedAddress = config.allowList && addressRefusal(config.allowList, clientIp, logger);
      if (refusedAddress) return refuse(refusedAddress);
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
          rawBody = await request.readBody(config.maxBodyBytes, config.maxDrainBytes);
        } catch (error) {
          if (isPayhookError(error))
            return refuse(error, error.code === 'payload_too_large' ? { connection: 'close' } : {});
          throw error;
        }
      }
      if (
        rawBody !== undefined &&
        (typeof rawBody === 'string' ? utf8Length(rawBody) : rawBody.byteLength) > config.maxBodyBytes
      ) {
        return refuse(tooLarge(config.maxBodyBytes), { connection: 'close' });
      }
      if (rawBody === undefined && !warnedParsed) {
        warnedParsed = true;
        logger.warn(
          {},
          'payhook: a body parser ran before the webhook handler, so only RFC 8785 canonicalization applies and duplicate keys go unseen; mount payhook before the body parser for full protection',
        );
      }
      let unsigned = config.checkSignature(
        request,
        rawBody !== undefined ? { rawBody } : { parsedBody: request.parsedBody },
      );
      // A promise only on Web Crypto: on node:crypto the step stays synchronous.
      if (unsigned instanceof Promise) unsigned = await unsigned;
      if (unsigned) return refuseEvent(unsigned, clientIp, request.headers);
      // parseEnvelope and checkEnvelope are verifyChecksum in two steps, so that the body's text,
      // decoded once, is also what the store keeps.
      let envelope: ParsedEnvelope | undefined;
      let verified: VerifyResult;
      try {
        envelope = parseEnvelope(
          rawBody !== undefined ? { rawBody } : { payload: request.parsedBody },
          config.maxDepth,
        );
        const mode = rawBody !== undefined ? (config.canonicalization ?? 'auto') : 'jcs';
        const checked = checkEnvelope(envelope, mode, config.businessIds, cryptoPath);
        verified = checked instanceof Promise ? await checked : checked;
      } catch (error) {
        verified = {
          ok: false,
          error: isPayhookError(error)
            ? error
            : new PayhookError('malformed_payload', 'The body could not be read.', { cause: error }),
        };
      }
      if (!verified.ok) return refuseEvent(verified.error, clientIp, request.headers);
      const key = `${verified.businessId}:${verified.payload.checksum.toLowerCase()}`;
      // The body as received, so another instance processes the very bytes that were verified.
      const payload = envelope?.text ?? JSON.stringify(verified.payload);
      // Admission and the claim's entry are one synchronous step: of concurrent copies on this
      // instance exactly one asks the store, the others wait for its answer.
      const claimed = await claimEvent(key, payload, verified.businessId, () => ({
        key,
        payload: verified.payload,
        businessId: verified.businessId,
        // The trace headers go with the work: its handlers run after the response.
        trace: config.tracing?.capture(request.headers),
      }));
      switch (claimed.kind) {
        case 'claimed':
          break;
        case 'duplicate':
          return duplicate();
        case 'stored':
          logger.debug({ key, state: claimed.state }, 'payhook: duplicate delivery acknowledged');
          return duplicate();
        case 'pending':
          // Acknowledged as a duplicate only once the first copy is recorded: if its claim
          // fails, this copy is not recorded either.
          return (await claimed.decided) === 'failed' ? storeUnavailable() : duplicate();
        case 'unavailable':
          reportError(claimed.error, { key, phase: 'store' });
          return storeUnavailable(claimed.error);
        case 'closing':
          return shuttingDown();
        case 'full':
          logger.warn({ key }, 'payhook: event refused, the work queue is full (503 queue_full)');
          return refuse(
            new PayhookError(
              'queue_full',
              'The receiver holds as much unfinished work as it may; the event was not recorded, send it again later.',
            ),
            { 'retry-after': '10' },
          );
      }
      hooks.accepted();
      return {
        status: 200,
        body: { received: true },
        headers: {},
        afterResponse: () => work.start(key),
        processed: () => work.processed(key),
      };
    },

    async replay(key) {
      const record = await store.get(key);
      if (!record) return { status: 'not_found' };
      if (record.state !== 'failed') return { status: 'not_failed', state: record.state };
      if (record.payload === undefined) return { status: 'not_found' };
      const businessId = record.businessId ?? '';
      const payload = JSON.parse(record.payload);
      const claimed = await claimEvent(key, record.payload, businessId, () => ({ key, payload, businessId }));
      switch (claimed.kind) {
        case 'claimed':
          break;
        case 'duplicate':
        case 'pending':
          return { status: 'not_failed', state: 'processing' };
        case 'stored':
          return { status: 'not_failed', state: claimed.state };
        case 'unavailable':
          throw claimed.error;
        case 'full':
          throw new PayhookError('queue_full', 'The work queue is full; replay the event once it has room.');
        case 'closing':
          throw new PayhookError(
            'shutting_down',
            'The receiver is shutting down; replay the event elsewhere.',
          );
      }
      work.start(key);
      return { status: 'replayed' };
    },

    recover,
    stats: work.stats,

    async idle() {
      await work.idle();
    },

    async close() {
      closing = true;
      if (recoveryTimer) clearInterval(recoveryTimer);
      // Every request admitted before this point is decided and, if acknowledged, processed.
      await work.close();
      if (!options.store) await store.close?.();
    },
  };
  if (hooks.requestsObserved) {
    // A request that makes handle() reject (a bug; the adapter answers 500) is counted as well.
    const handle = receiver.handle;
    receiver.handle = (request) =>
      handle(request).catch((error: unknown) => {
        hooks.refused('internal_error', 500);
        throw error;
      });
  }
  return receiver;
}
