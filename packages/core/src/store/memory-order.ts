import type { ObjectLock, ObjectOrderStore, StoredEvent } from './types.js';

/**
 * An object's order record: its highest completed rank, and the claim that holds its lock: the
 * event's key and its `attempts` when it locked, which a new claim of the event (a recovery, a
 * redelivery after failure) changes, so that claim does not inherit the lock.
 */
interface ObjectRecord {
  rank: number | undefined;
  holder: string | undefined;
  holderAttempts: number;
  updatedAt: number;
}

/** What the memory store's order needs from the store it belongs to. */
export interface MemoryOrderOptions {
  /** The record of `key`, unless it expired. */
  live(key: string): StoredEvent | undefined;
  /** The record of `key` if `owner` holds it (`processing`, its owner). */
  held(key: string, owner: string): StoredEvent | undefined;
  /** The store's own `complete`. */
  complete(key: string, owner: string): Promise<boolean>;
  now(): number;
  retentionMs: number;
  /** Most order records kept: past it the oldest unlocked ones are evicted (the store's maxEntries). */
  maxEntries: number;
}

/**
 * Per-object order in the memory of one process ({@link ObjectOrderStore}): a lock is held by a
 * claim of an event while that claim lasts (`processing` under a live lease, the same attempts),
 * so it needs no renewal of its own; ranks are kept for the retention after an object's last
 * completion.
 */
export function createMemoryOrder(options: MemoryOrderOptions): ObjectOrderStore {
  const { live, held, now, retentionMs, maxEntries } = options;
  // In the order records last changed (each write re-inserts): the first entries are the oldest.
  const objects = new Map<string, ObjectRecord>();
  let nextSweep = 0;
  const put = (id: string, record: ObjectRecord) => {
    objects.delete(id);
    objects.set(id, record);
  };

  // Objects of different businesses never share a record: the key's business scopes the name.
  const name = (key: string, object: string) =>
    `${key.slice(0, Math.max(0, key.lastIndexOf(':')))}\n${object}`;

  // As the store's own sweep: when over the bound, and otherwise at most once a second.
  const sweep = (t: number) => {
    if (objects.size <= maxEntries && t < nextSweep) return;
    nextSweep = t + Math.min(1000, retentionMs);
    for (const [id, record] of objects) {
      if (objects.size <= maxEntries && record.updatedAt + retentionMs > t) break;
      if (!lockedBy(record, t)) objects.delete(id);
    }
  };

  /** The event holding `record`'s lock, if the claim that locked it is still live. */
  const lockedBy = (record: ObjectRecord, t: number): string | undefined => {
    if (record.holder === undefined) return undefined;
    const holder = live(record.holder);
    return holder?.state === 'processing' &&
      (holder.leaseUntil ?? 0) > t &&
      holder.attempts === record.holderAttempts
      ? record.holder
      : undefined;
  };

  return {
    async lock(key, owner, object): Promise<ObjectLock> {
      const t = now();
      const event = held(key, owner);
      if (event === undefined || (event.leaseUntil ?? 0) <= t) return LOST;
      sweep(t);
      const id = name(key, object);
      const record = objects.get(id) ?? {
        rank: undefined,
        holder: undefined,
        holderAttempts: 0,
        updatedAt: t,
      };
      const holder = lockedBy(record, t);
      if (holder !== undefined && holder !== key) return BUSY;
      record.holder = key;
      record.holderAttempts = event.attempts;
      record.updatedAt = t;
      put(id, record);
      return { status: 'locked', rank: record.rank };
    },

    async complete(key, owner, object, rank) {
      // One synchronous step: nothing runs between the done mark and the rank.
      if (held(key, owner) === undefined) return false;
      const done = options.complete(key, owner);
      const id = name(key, object);
      const record = objects.get(id) ?? {
        rank: undefined,
        holder: undefined,
        holderAttempts: 0,
        updatedAt: now(),
      };
      if (rank !== undefined && (record.rank === undefined || rank > record.rank)) record.rank = rank;
      if (record.holder === key) record.holder = undefined;
      record.updatedAt = now();
      put(id, record);
      return done;
    },
  };
}

const LOST: ObjectLock = { status: 'lost' };
const BUSY: ObjectLock = { status: 'busy' };
