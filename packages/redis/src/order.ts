import type { ObjectLock, ObjectOrderStore } from '@payhook/core';
import { keyNames } from './keys.js';
import type { ScriptCommands } from './scripts.js';

/** What the Redis store's order needs from the store. */
export interface RedisOrderOptions {
  prefix: string;
  retentionMs: number;
  scripts: ScriptCommands;
  /** Runs one command under the store's timeout, counted. */
  call<T>(name: string, run: () => Promise<T>): Promise<T>;
}

/**
 * Per-object order in Redis ({@link ObjectOrderStore}; the scripts LOCK and COMPLETE_ORDERED): an
 * object's record sits in the hash tag of its business, beside the events' records, so one
 * script reads the lock's holder and another marks an event done and raises its object's rank in
 * one step. Each call is one round trip.
 */
export function createRedisOrder(options: RedisOrderOptions): ObjectOrderStore {
  const { prefix, retentionMs, scripts, call } = options;
  return {
    async lock(key, owner, object): Promise<ObjectLock> {
      const k = keyNames(prefix, key);
      const reply = await call('lock', () =>
        scripts.payhookLock(k.record, k.objectPrefix + object, owner, k.recordPrefix, k.member, retentionMs),
      );
      if (reply[0] === 'busy') return BUSY;
      if (reply[0] !== 'locked') return LOST;
      const rank = reply[1];
      return { status: 'locked', rank: rank === undefined || rank === '' ? undefined : Number(rank) };
    },

    async complete(key, owner, object, rank) {
      const k = keyNames(prefix, key);
      return (
        (await call('complete', () =>
          scripts.payhookCompleteOrdered(
            k.record,
            k.leases,
            k.objectPrefix + object,
            owner,
            retentionMs,
            k.member,
            rank === undefined ? '' : String(rank),
          ),
        )) === 1
      );
    },
  };
}

const BUSY: ObjectLock = { status: 'busy' };
const LOST: ObjectLock = { status: 'lost' };
