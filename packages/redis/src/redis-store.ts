import {
  DEFAULT_RETENTION_MS,
  type IdempotencyStore,
  type RecoveredEvent,
  type StoredEvent,
} from '@payhook/core';
import { Redis, type RedisOptions } from 'ioredis';
import { keyNames, tagKeys, tagsKey } from './keys.js';
import { CLAIM, COMPLETE, FAIL, RECOVER, RENEW } from './scripts.js';

/** Options of {@link createRedisStore}. */
export interface RedisStoreOptions {
  /** An ioredis client (never closed by the store) or a URL (the store's own client, closed by `close()`). */
  redis: Redis | string;
  /** Prefix of every key (default `payhook`); give each environment its own. */
  prefix?: string;
  /** How long finished and failed events are kept, in ms (default 7 days): duplicates and replays within it are refused. */
  retentionMs?: number;
  /**
   * Lease on an event being processed, for receivers that set none (default 30 s): an event whose
   * owner died is recovered by another instance this long after its last renewal.
   */
  leaseMs?: number;
  /** Time allowed to each command, in ms (default 1000); past it the store is unavailable and the receiver answers 503. */
  commandTimeoutMs?: number;
  /** Extra options for the client the store creates from a URL. */
  redisOptions?: RedisOptions;
}

/** The Redis store, with the counters the benchmark reads. */
export interface RedisStore extends IdempotencyStore {
  /** The client the store uses. */
  readonly redis: Redis;
  /** Commands sent so far (each one round trip). */
  readonly commandCount: number;
}

/**
 * The error of a store command that did not answer within `commandTimeoutMs`; the receiver
 * reports it to `onError` (phase `store`) and answers 503 `store_unavailable`.
 *
 * @example
 * ```ts
 * receiver.onError((error) => {
 *   if (error instanceof StoreTimeoutError) metrics.increment('redis.timeouts');
 * });
 * ```
 */
export class StoreTimeoutError extends Error {
  override readonly name = 'StoreTimeoutError';
  constructor(command: string, ms: number) {
    super(`Redis did not answer ${command} within ${ms} ms.`);
  }
}

type ScriptCommands = {
  payhookClaim(
    e: string,
    l: string,
    ...args: (string | number)[]
  ): Promise<[string, string, (number | string)?]>;
  payhookRenew(e: string, l: string, ...args: (string | number)[]): Promise<number>;
  payhookComplete(e: string, l: string, ...args: (string | number)[]): Promise<number>;
  payhookFail(e: string, l: string, ...args: (string | number)[]): Promise<number>;
  payhookRecover(l: string, ...args: (string | number)[]): Promise<(string | number)[]>;
};

/**
 * An idempotency store and durable inbox in Redis, shared by every receiver instance: an event is
 * claimed atomically (with its verified payload, before the 200 is sent), its lease renewed while
 * its handler runs, and a tombstone kept after it is done; an event whose owner died is claimed
 * again by whichever instance recovers it. Each operation is one round trip (a Lua script), every
 * command has a timeout, and the keys of one business share a hash tag, so it runs on Redis
 * Cluster too.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * import { createReceiver } from '@payhook/core';
 * import { createRedisStore } from '@payhook/redis';
 *
 * const store = createRedisStore({ redis: new Redis(process.env.REDIS_URL!), prefix: 'payhook:prod' });
 * const receiver = createReceiver({ businessIds: [process.env.BUSINESS_ID!], allowedIps: ['203.0.113.10'], store });
 * ```
 */
export function createRedisStore(options: RedisStoreOptions): RedisStore {
  const prefix = options.prefix ?? 'payhook';
  if (typeof prefix !== 'string' || prefix.length === 0 || /[{}]/.test(prefix)) {
    throw new TypeError(`Invalid prefix: ${JSON.stringify(prefix)} (a non-empty string without braces).`);
  }
  const retentionMs = options.retentionMs ?? DEFAULT_RETENTION_MS;
  if (!Number.isInteger(retentionMs) || retentionMs <= 0) {
    throw new TypeError(`Invalid retentionMs: ${retentionMs} (expected a positive integer of milliseconds).`);
  }
  if (options.leaseMs !== undefined && (!Number.isFinite(options.leaseMs) || options.leaseMs <= 0)) {
    throw new TypeError(`Invalid leaseMs: ${options.leaseMs} (expected a positive number of milliseconds).`);
  }
  const timeoutMs = options.commandTimeoutMs ?? 1000;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new TypeError(
      `Invalid commandTimeoutMs: ${timeoutMs} (expected a positive number of milliseconds).`,
    );
  }
  let redis: Redis;
  let owned = false;
  if (typeof options.redis === 'string') {
    redis = new Redis(options.redis, {
      maxRetriesPerRequest: 1,
      commandTimeout: timeoutMs,
      lazyConnect: false,
      ...options.redisOptions,
    });
    // Connection errors surface as failed commands (503); the client reconnects by itself.
    redis.on('error', () => {});
    owned = true;
  } else if (options.redis && typeof options.redis.defineCommand === 'function') {
    redis = options.redis;
  } else {
    throw new TypeError('Invalid redis: pass an ioredis client or a redis:// URL.');
  }
  redis.defineCommand('payhookClaim', { numberOfKeys: 2, lua: CLAIM });
  redis.defineCommand('payhookRenew', { numberOfKeys: 2, lua: RENEW });
  redis.defineCommand('payhookComplete', { numberOfKeys: 2, lua: COMPLETE });
  redis.defineCommand('payhookFail', { numberOfKeys: 2, lua: FAIL });
  redis.defineCommand('payhookRecover', { numberOfKeys: 1, lua: RECOVER });
  const scripts = redis as unknown as ScriptCommands;
  let commandCount = 0;
  const knownTags = new Set<string>();

  /** Runs one command under the store's timeout: a store never hangs a request. */
  function call<T>(name: string, run: () => Promise<T>): Promise<T> {
    commandCount++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new StoreTimeoutError(name, timeoutMs)), timeoutMs);
      run().then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
  }

  return {
    redis,
    leaseMs: options.leaseMs,
    get commandCount() {
      return commandCount;
    },

    async claim(key, request) {
      const k = keyNames(prefix, key);
      if (!knownTags.has(k.tag)) {
        // Recovery finds businesses through this set; written once per business and process.
        await call('SADD', () => redis.sadd(tagsKey(prefix), k.tag));
        knownTags.add(k.tag);
      }
      const reply = await call('claim', () =>
        scripts.payhookClaim(
          k.record,
          k.leases,
          request.owner,
          request.leaseMs,
          request.payload,
          request.businessId,
          retentionMs,
          k.member,
        ),
      );
      if (reply[0] === 'duplicate') {
        return reply[1] === 'done'
          ? { status: 'duplicate', state: 'done' }
          : { status: 'duplicate', state: 'processing', owner: String(reply[2] ?? '') };
      }
      return {
        status: 'claimed',
        previous: reply[1] as 'new' | 'failed' | 'expired',
        attempts: Number(reply[2]),
      };
    },

    async renew(key, owner, leaseMs) {
      const k = keyNames(prefix, key);
      return (
        (await call('renew', () => scripts.payhookRenew(k.record, k.leases, owner, leaseMs, k.member))) === 1
      );
    },

    async complete(key, owner) {
      const k = keyNames(prefix, key);
      return (
        (await call('complete', () =>
          scripts.payhookComplete(k.record, k.leases, owner, retentionMs, k.member),
        )) === 1
      );
    },

    async fail(key, owner, error) {
      const k = keyNames(prefix, key);
      return (
        (await call('fail', () =>
          scripts.payhookFail(k.record, k.leases, owner, retentionMs, k.member, error),
        )) === 1
      );
    },

    async recover(owner, leaseMs, limit) {
      const tags = await call('SMEMBERS', () => redis.smembers(tagsKey(prefix)));
      const out: RecoveredEvent[] = [];
      for (const tag of tags) {
        if (out.length >= limit) break;
        const t = tagKeys(prefix, tag);
        const reply = await call('recover', () =>
          scripts.payhookRecover(t.leases, owner, leaseMs, limit - out.length, t.recordPrefix),
        );
        for (let i = 0; i + 3 < reply.length; i += 4) {
          const member = String(reply[i]);
          out.push({
            key: tag === '' ? member : `${tag}:${member}`,
            payload: String(reply[i + 1]),
            businessId: String(reply[i + 2]),
            attempts: Number(reply[i + 3]),
          });
        }
      }
      return out;
    },

    async get(key): Promise<StoredEvent | undefined> {
      const k = keyNames(prefix, key);
      const h = await call('HGETALL', () => redis.hgetall(k.record));
      if (!h.state) return undefined;
      const num = (v: string | undefined) => (v === undefined ? undefined : Number(v));
      return {
        key,
        state: h.state as StoredEvent['state'],
        owner: h.owner,
        leaseUntil: num(h.lease),
        payload: h.payload,
        businessId: h.biz,
        attempts: Number(h.attempts ?? 0),
        error: h.error,
        receivedAt: Number(h.received ?? 0),
        updatedAt: Number(h.updated ?? 0),
      };
    },

    async close() {
      if (!owned || redis.status === 'end') return;
      const ended = new Promise((resolve) => redis.once('end', resolve));
      await redis.quit().catch(() => redis.disconnect());
      await ended;
    },
  };
}
