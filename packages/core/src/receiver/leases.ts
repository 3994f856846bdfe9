import type { IdempotencyStore } from '../store/types.js';
import { type Timer, unref } from './timers.js';
import type { ErrorInfo } from './types.js';

/** This instance's hold on an event; `lost` once a renewal found another owner. */
export interface Lease {
  lost: boolean;
}

/**
 * The leases of the events this instance holds, from acceptance until the outcome is recorded,
 * renewed together by one timer rather than one per event. The timer runs while anything is
 * held; it stops at the first tick that finds nothing.
 */
export function createLeases(options: {
  store: IdempotencyStore;
  instanceId: string;
  leaseMs: number;
  reportError(error: unknown, info: ErrorInfo): void;
}) {
  const { store, instanceId, leaseMs, reportError } = options;
  const held = new Map<string, Lease>();
  let timer: Timer | undefined;

  const renewAll = () => {
    if (held.size === 0) {
      clearInterval(timer);
      timer = undefined;
      return;
    }
    for (const [key, lease] of held) {
      store.renew(key, instanceId, leaseMs).then(
        (ok) => {
          if (!ok) lease.lost = true;
        },
        (error) => reportError(error, { key, phase: 'store' }),
      );
    }
  };

  return {
    /** Starts renewing `key`'s lease. */
    hold(key: string): Lease {
      const lease: Lease = { lost: false };
      held.set(key, lease);
      if (timer === undefined) {
        timer = setInterval(renewAll, Math.max(10, Math.floor(leaseMs / 3)));
        unref(timer);
      }
      return lease;
    },
    get: (key: string): Lease | undefined => held.get(key),
    /** Stops renewing `key`'s lease (its outcome is recorded, or it is lost). */
    drop: (key: string): void => {
      held.delete(key);
    },
  };
}

export type Leases = ReturnType<typeof createLeases>;
