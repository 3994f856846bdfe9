import { createMemoryOrder } from './memory-order.js';
import { checkMilliseconds, DEFAULT_RETENTION_MS } from './store-helpers.js';
import type { ClaimRequest, ClaimResult, IdempotencyStore, RecoveredEvent, StoredEvent } from './types.js';

/** Options of {@link createMemoryStore}. */
export interface MemoryStoreOptions {
  /** How long done and failed records are kept, in ms (default 7 days). */
  retentionMs?: number;
  /** Clock, for tests (default `Date.now`). */
  now?: () => number;
  /**
   * Most records kept; the oldest finished ones are evicted past it (default 1,000,000). The
   * order records of payments (per-payment order) are bounded by it too.
   */
  maxEntries?: number;
  /** Lease on an event being processed, for receivers that set none (default 30 s). */
  leaseMs?: number;
}

/**
 * An idempotency store in the memory of one process: exactly-once within that process, nothing
 * shared and nothing kept across restarts; per-object order too (`order`). The default of
 * `createReceiver`; use `@payhook/redis` when several instances receive, or when an acknowledged
 * event must survive a crash.
 *
 * @example
 * ```ts
 * const receiver = createReceiver({
 *   businessIds: [process.env.BUSINESS_ID!],
 *   allowedIps: ['203.0.113.10'],
 *   store: createMemoryStore({ retentionMs: 24 * 60 * 60 * 1000 }),
 * });
 * ```
 */
export function createMemoryStore(options: MemoryStoreOptions = {}): IdempotencyStore {
  const retentionMs = checkMilliseconds('retentionMs', options.retentionMs ?? DEFAULT_RETENTION_MS, 'number');
  const now = options.now ?? Date.now;
  const maxEntries = options.maxEntries ?? 1_000_000;
  // Map keeps insertion order, and every write re-inserts: the first entries are the oldest.
  const records = new Map<string, StoredEvent>();

  // Re-inserting moves a record to the end: the map stays in the order records last changed.
  const put = (record: StoredEvent, existed: boolean) => {
    if (existed) records.delete(record.key);
    records.set(record.key, record);
  };

  const live = (key: string): StoredEvent | undefined => {
    const record = records.get(key);
    if (record && record.state !== 'processing' && record.updatedAt + retentionMs <= now()) {
      records.delete(key);
      return undefined;
    }
    return record;
  };

  // The sweep runs when the store is over its size, and otherwise at most once a second: reads
  // skip an expired record anyway, so the sweep only bounds memory.
  let nextSweep = 0;
  const sweep = (t: number) => {
    if (records.size <= maxEntries && t < nextSweep) return;
    nextSweep = t + Math.min(1000, retentionMs);
    for (const record of records.values()) {
      if (records.size <= maxEntries && record.updatedAt + retentionMs > t) break;
      if (record.state !== 'processing') records.delete(record.key);
    }
  };

  const held = (key: string, owner: string): StoredEvent | undefined => {
    const record = live(key);
    return record?.state === 'processing' && record.owner === owner ? record : undefined;
  };

  /**
   * Ends the event `owner` holds (`end` sets its final state): no owner, no lease, kept to refuse
   * duplicates. False when `owner` does not hold it. (Records are never handed out, only copies,
   * so they change in place.)
   */
  const finish = (key: string, owner: string, end: (record: StoredEvent) => void): boolean => {
    const record = held(key, owner);
    if (!record) return false;
    end(record);
    record.owner = undefined;
    record.leaseUntil = undefined;
    record.updatedAt = now();
    put(record, true);
    return true;
  };

  const store: IdempotencyStore = {
    leaseMs: options.leaseMs,
    // Per-object order: one step with the done mark, as everything here is synchronous.
    order: createMemoryOrder({
      live,
      held,
      complete: (key, owner) => store.complete(key, owner),
      now,
      retentionMs,
      maxEntries,
    }),

    async claim(key: string, request: ClaimRequest): Promise<ClaimResult> {
      const t = now();
      const record = live(key);
      let previous: 'new' | 'failed' | 'expired' = 'new';
      if (record) {
        if (record.state === 'done') return { status: 'duplicate', state: 'done' };
        // A live lease is never granted twice, not even to its own owner (docs/decisions.md,
        // "Exactly once across copies").
        if (record.state === 'processing' && (record.leaseUntil ?? 0) > t) {
          return { status: 'duplicate', state: 'processing', owner: record.owner ?? '' };
        }
        previous = record.state === 'failed' ? 'failed' : 'expired';
      }
      const attempts = (record?.attempts ?? 0) + 1;
      put(
        {
          key,
          state: 'processing',
          owner: request.owner,
          leaseUntil: t + request.leaseMs,
          payload: request.payload,
          businessId: request.businessId,
          attempts,
          error: record?.error,
          receivedAt: record?.receivedAt ?? t,
          updatedAt: t,
        },
        record !== undefined,
      );
      sweep(t);
      return { status: 'claimed', attempts, previous };
    },

    async renew(key, owner, leaseMs) {
      const record = held(key, owner);
      if (!record) return false;
      record.leaseUntil = now() + leaseMs;
      return true;
    },

    async complete(key, owner) {
      // A tombstone: the payload is not needed to refuse duplicates.
      return finish(key, owner, (record) => {
        record.state = 'done';
        record.payload = undefined;
      });
    },

    async fail(key, owner, error) {
      return finish(key, owner, (record) => {
        record.state = 'failed';
        record.error = error;
      });
    },

    async recover(owner, leaseMs, limit) {
      const t = now();
      const out: RecoveredEvent[] = [];
      for (const record of records.values()) {
        if (out.length >= limit) break;
        if (record.state !== 'processing' || (record.leaseUntil ?? 0) > t || record.payload === undefined)
          continue;
        record.owner = owner;
        record.leaseUntil = t + leaseMs;
        record.attempts += 1;
        out.push({
          key: record.key,
          payload: record.payload,
          businessId: record.businessId ?? '',
          attempts: record.attempts,
        });
      }
      return out;
    },

    async get(key) {
      const record = live(key);
      return record ? { ...record } : undefined;
    },
  };
  return store;
}
