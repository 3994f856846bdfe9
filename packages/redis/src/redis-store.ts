import {
  type IdempotencyStore,
  type ObjectOrderStore,
  type RecoveredEvent,
  type StoredEvent,
  stderrLogger,
  withStoreTimeout,
} from '@payhook/core';
import { type Cluster, Redis, type RedisOptions } from 'ioredis';
import { clusterReady, isCluster, isRedirection, keySlot, masterOf } from './cluster.js';
import {
  createReplicaWaiter,
  persistenceSubject,
  type RedisPersistence,
  readClusterPersistence,
  readPersistence,
  reportPersistence,
} from './durability.js';
import { type KeyNames, keyNames, tagKeys, tagsKey } from './keys.js';
import { type RedisStoreOptions, resolveOptions } from './options.js';
import { createRedisOrder } from './order.js';
import { type ClaimReply, defineScripts, SCRIPTS, type ScriptCommands } from './scripts.js';

/** The Redis store, with the counters the benchmark reads. */
export interface RedisStore<Client extends Redis | Cluster = Redis> extends IdempotencyStore {
  /** The client the store uses. */
  readonly redis: Client;
  /** Commands sent so far (each one round trip). */
  readonly commandCount: number;
  /**
   * The server's persistence settings, as read at start (undefined with `checkPersistence: false`):
   * whether an acknowledged event survives a Redis restart.
   */
  readonly persistence: Promise<RedisPersistence> | undefined;
  /** Per-object order, kept beside the events (one script per step). */
  readonly order: ObjectOrderStore;
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

/**
 * An idempotency store and durable inbox in Redis, shared by every receiver instance: an event is
 * claimed atomically (with its verified payload, before the 200 is sent), its lease renewed while
 * its handler runs, and a tombstone kept after it is done; an event whose owner died is claimed
 * again by whichever instance recovers it. Each operation is one round trip (a Lua script), every
 * command has a timeout, and the keys of one business share a hash tag, so it runs on Redis
 * Cluster too: pass a `Cluster` client. It keeps per-object order as well (`order`): the events of
 * one payment run one at a time across every instance.
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
export function createRedisStore(options: RedisStoreOptions & { redis: Cluster }): RedisStore<Cluster>;
export function createRedisStore(options: RedisStoreOptions & { redis: Redis | string }): RedisStore<Redis>;
export function createRedisStore(options: RedisStoreOptions): RedisStore<Redis | Cluster>;
export function createRedisStore(options: RedisStoreOptions): RedisStore<Redis | Cluster> {
  const { prefix, retentionMs, timeoutMs, durability, replicas, waitMs } = resolveOptions(options);
  let redis: Redis | Cluster;
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
    throw new TypeError('Invalid redis: pass an ioredis client (Redis or Cluster) or a redis:// URL.');
  }
  const cluster = isCluster(redis) ? redis : undefined;
  if (cluster && durability === 'replicas' && cluster.options.keyPrefix) {
    // Claims then go straight to their slot's master connection, which does not add the prefix.
    throw new TypeError(
      "Invalid redis: a Cluster client with keyPrefix cannot be used with durability 'replicas'; use the store's prefix option.",
    );
  }
  const scripts = defineScripts(redis, Object.keys(SCRIPTS) as (keyof ScriptCommands)[]);
  let commandCount = 0;
  const knownTags = new Set<string>();
  // With `durability: 'replicas'`: per connection that claims are written on (the one client, or
  // each cluster master's), the WAITs its claims share.
  const waiters = new WeakMap<Redis, () => Promise<void>>();
  const confirmOn =
    durability === 'replicas'
      ? (connection: Redis): Promise<void> => {
          let confirm = waiters.get(connection);
          if (!confirm) {
            confirm = createReplicaWaiter(
              () => call('WAIT', () => connection.call('WAIT', replicas, waitMs) as Promise<number>),
              replicas,
              waitMs,
            );
            waiters.set(connection, confirm);
          }
          return confirm();
        }
      : undefined;
  let persistence: Promise<RedisPersistence> | undefined;
  if (options.checkPersistence ?? true) {
    const read = cluster
      ? readClusterPersistence(cluster, timeoutMs)
      : readPersistence(redis as Redis, timeoutMs);
    const single = redis.options as RedisOptions;
    const where = `${single.host ?? 'localhost'}:${single.port ?? 6379}`;
    persistence = read.then((report) => {
      reportPersistence(report, persistenceSubject(report, where), options.logger ?? stderrLogger);
      return report;
    });
  }

  /**
   * Runs the claim script; returns its reply and the connection it was written on, for the WAIT.
   * On a cluster with replicas to confirm, the script goes straight to the connection of the slot's
   * master (by the client's slot table), so that the WAIT follows it on that very connection; a
   * redirection (the slot moved: a failover or a resharding) refreshes the table and tries once more.
   */
  async function runClaim(k: KeyNames, args: (string | number)[]): Promise<[ClaimReply, Redis]> {
    if (!cluster || !confirmOn) {
      return [await scripts.payhookClaim(k.record, k.leases, ...args), redis as Redis];
    }
    await clusterReady(cluster);
    for (let attempt = 0; ; attempt++) {
      const master = masterOf(cluster, k.record);
      if (!master) throw new Error(`The Redis Cluster client knows no master for slot ${keySlot(k.record)}.`);
      try {
        const node = defineScripts(master, ['payhookClaim']);
        return [await node.payhookClaim(k.record, k.leases, ...args), master];
      } catch (error) {
        if (!isRedirection(error) || attempt > 0) throw error;
        await new Promise<void>((resolve) => cluster.refreshSlotsCache(() => resolve()));
      }
    }
  }

  /** Runs one command under the store's timeout: a store never hangs a request. */
  function call<T>(name: string, run: () => Promise<T>): Promise<T> {
    commandCount++;
    return withStoreTimeout(timeoutMs, run, () => new StoreTimeoutError(name, timeoutMs));
  }

  return {
    redis,
    leaseMs: options.leaseMs,
    persistence,
    order: createRedisOrder({ prefix, retentionMs, scripts, call }),
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
      const [reply, connection] = await call('claim', () =>
        runClaim(k, [
          request.owner,
          request.leaseMs,
          request.payload,
          request.businessId,
          retentionMs,
          k.member,
          // With replicas to confirm, a duplicate writes too, so that the WAIT below covers the
          // record it found (written perhaps by another instance's connection).
          confirmOn ? 1 : 0,
        ]),
      );
      // The 200 waits until the replicas hold what it acknowledges.
      await confirmOn?.(connection);
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
