import { createIpAllowList, type IpAllowList } from '../ip.js';
import { DEFAULT_MAX_DEPTH } from '../lexical-canonical-json.js';
import { createMemoryStore } from '../store/memory-store.js';
import { stderrLogger } from './logger.js';
import { createMetricHooks, resolveMetrics } from './metrics.js';
import { resolveOrder } from './order-options.js';
import { resolveMaxDrainBytes } from './read-body.js';
import { resolveRetry } from './retry.js';
import { createSignatureCheck } from './signature-check.js';
import { resolveTracing } from './tracing.js';
import type { ReceiverOptions } from './types.js';

const DEFAULT_MAX_BODY = 1024 * 1024;
/**
 * The default `maxQueuedEvents`: how many acknowledged-but-unfinished events a receiver holds
 * before it answers 503 `queue_full` (docs/decisions.md, "Back-pressure").
 *
 * @example
 * ```ts
 * createReceiver({ businessIds, allowedIps, maxQueuedEvents: 4 * DEFAULT_MAX_QUEUED_EVENTS });
 * ```
 */
export const DEFAULT_MAX_QUEUED_EVENTS = 1000;
/**
 * The default `maxQueuedBytes` (16 MiB): the body bytes of acknowledged-but-unfinished events a
 * receiver holds before it answers 503 `queue_full`; one event alone is always admitted.
 *
 * @example
 * ```ts
 * createReceiver({ businessIds, allowedIps, maxQueuedBytes: DEFAULT_MAX_QUEUED_BYTES / 4 });
 * ```
 */
export const DEFAULT_MAX_QUEUED_BYTES = 16 * 1024 * 1024;

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
 * The receiver's options, validated (a TypeError names the bad value) and with their defaults.
 * Everything `createReceiver` reads from its options is read here, once.
 */
export function resolveReceiverOptions(options: ReceiverOptions) {
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
  const maxDrainBytes = resolveMaxDrainBytes(options.maxDrainBytes, maxBodyBytes);
  const maxDepth = positive('maxDepth', options.maxDepth, DEFAULT_MAX_DEPTH);
  const store = options.store ?? createMemoryStore();
  const leaseMs = positive('leaseMs', options.leaseMs ?? store.leaseMs, 30_000);
  const recoveryIntervalMs = positive('recoveryIntervalMs', options.recoveryIntervalMs, 10_000, true);
  const concurrency = positive('concurrency', options.concurrency, 10);
  const handlerTimeoutMs = positive('handlerTimeoutMs', options.handlerTimeoutMs, 30_000);
  const retry = resolveRetry(options.retry);
  const maxQueuedEvents = positive('maxQueuedEvents', options.maxQueuedEvents, DEFAULT_MAX_QUEUED_EVENTS);
  const maxQueuedBytes = positive('maxQueuedBytes', options.maxQueuedBytes, DEFAULT_MAX_QUEUED_BYTES);
  const logger = options.logger ?? stderrLogger;
  const hooks = createMetricHooks(resolveMetrics(options.metrics), logger);
  const tracing = resolveTracing(options.tracing, logger);
  const instanceId = options.instanceId ?? globalThis.crypto.randomUUID();
  const order = resolveOrder(options, store, logger);
  // Last: its start-time warning (allowUnsigned) is written only once every option is valid.
  const checkSignature = createSignatureCheck(options, logger);
  return {
    businessIds,
    allowList,
    trustedProxies,
    canonicalization,
    checkSignature,
    maxBodyBytes,
    maxDrainBytes,
    maxDepth,
    store,
    leaseMs,
    recoveryIntervalMs,
    concurrency,
    handlerTimeoutMs,
    retry,
    maxQueuedEvents,
    maxQueuedBytes,
    logger,
    hooks,
    tracing,
    instanceId,
    order,
  };
}
