// The options of createRedisStore: what each means, their checks and their defaults.
import { checkStoreTimes, type Logger } from '@payhook/core';
import type { Cluster, Redis, RedisOptions } from 'ioredis';

/** Options of `createRedisStore`. */
export interface RedisStoreOptions {
  /**
   * An ioredis client, `Redis` or `Cluster` (never closed by the store), or a URL (the store's own
   * `Redis` client, closed by `close()`).
   */
  redis: Redis | Cluster | string;
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
  /**
   * What a 200 waits for. `'default'`: the claim is in the Redis primary's memory (and in its
   * append-only file, as its `appendfsync` says). `'replicas'`: also confirmed by `replicas`
   * replicas with `WAIT` within `waitMs`, else the receiver answers 503 `store_unavailable` and the
   * service retries: a failover to a confirmed replica loses no acknowledged event. On a Redis
   * Cluster, the replicas of the master that serves the event's slot.
   */
  durability?: 'default' | 'replicas';
  /** With `durability: 'replicas'`: how many replicas must confirm each claim (default 1). */
  replicas?: number;
  /** With `durability: 'replicas'`: how long a claim waits for them, in ms (default 500; below `commandTimeoutMs`). */
  waitMs?: number;
  /**
   * Reads the server's persistence settings at start (`CONFIG GET appendonly`, `appendfsync`) and
   * warns once when acknowledged events would not survive a Redis restart (default true). Pass
   * false for deliberate setups: tests, or a Redis used as a cache of events kept elsewhere.
   */
  checkPersistence?: boolean;
  /** Where that warning goes (default: one line on stderr, as the receiver's warnings). */
  logger?: Logger;
}

/** The options `createRedisStore` runs with, checked, defaults filled in. */
export interface ResolvedOptions {
  prefix: string;
  retentionMs: number;
  timeoutMs: number;
  durability: 'default' | 'replicas';
  replicas: number;
  waitMs: number;
}

/** Checks the options (a TypeError naming the first wrong one) and fills in the defaults. */
export function resolveOptions(options: RedisStoreOptions): ResolvedOptions {
  const prefix = options.prefix ?? 'payhook';
  if (typeof prefix !== 'string' || prefix.length === 0 || /[{}]/.test(prefix)) {
    throw new TypeError(`Invalid prefix: ${JSON.stringify(prefix)} (a non-empty string without braces).`);
  }
  const { retentionMs, timeoutMs } = checkStoreTimes(options, {
    commandTimeoutMs: 1000,
    leaseKind: 'number',
  });
  const durability = options.durability ?? 'default';
  if (durability !== 'default' && durability !== 'replicas') {
    throw new TypeError(
      `Invalid durability: ${JSON.stringify(durability)} (expected 'default' or 'replicas').`,
    );
  }
  const replicas = options.replicas ?? 1;
  if (!Number.isInteger(replicas) || replicas < 1) {
    throw new TypeError(`Invalid replicas: ${replicas} (expected a positive integer).`);
  }
  const waitMs = options.waitMs ?? Math.min(500, Math.floor(timeoutMs / 2));
  if (durability === 'replicas' && (!Number.isInteger(waitMs) || waitMs <= 0 || waitMs >= timeoutMs)) {
    throw new TypeError(
      `Invalid waitMs: ${waitMs} (expected a positive integer of milliseconds below commandTimeoutMs, ${timeoutMs}).`,
    );
  }
  return { prefix, retentionMs, timeoutMs, durability, replicas, waitMs };
}
