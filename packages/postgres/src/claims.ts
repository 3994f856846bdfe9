// Claims in groups: while the store's claim statements are in flight, the claims that come wait,
// and the next statement claims them together. Under load that makes one round trip and one
// flushed commit for many events in place of one each; a claim that comes alone goes at once.
import type { ClaimRequest, ClaimResult } from '@payhook/core';
import { PostgresTimeoutError } from './timeout.js';

/** Claim statements in flight at once (the connections the transactions leave the store). */
export const CLAIMS_IN_FLIGHT = 2;
/** The most claims one statement takes. */
export const CLAIMS_PER_STATEMENT = 64;
/** The most payload text one statement takes; a larger payload goes in a statement of its own. */
export const CLAIM_PAYLOAD_CHARS = 1 << 20;

/** What the claim statement answers for each key of its group. */
export interface ClaimRow {
  key: string;
  last_claim: string;
  state: string;
  owner: string | null;
  attempts: number;
}

/** A claim waiting for its statement. */
export interface PendingClaim {
  key: string;
  request: ClaimRequest;
}

interface Waiter extends PendingClaim {
  /** Whether its caller has its answer (a row, an error, or its timeout). */
  settled: boolean;
  settle(error: unknown, row?: ClaimRow): void;
}

/** What the groups need from the store. */
export interface ClaimGroupsOptions {
  /** Runs the claim statement on a group of distinct keys, under the statement's own timeout. */
  run(group: readonly PendingClaim[]): Promise<ClaimRow[]>;
  /** How long a claim may take, its wait for a statement included. */
  timeoutMs: number;
}

/**
 * Claims `key`s in groups. A claim waits for a free statement (at most {@link CLAIMS_IN_FLIGHT}
 * in flight), then goes with the others waiting: at most {@link CLAIMS_PER_STATEMENT}, distinct
 * keys (a second claim of a key waits for the next statement, so that it meets the first's row).
 * A claim that times out while it waits is never sent. A group that fails on its data (an error
 * of SQLSTATE class 22, 23 or 54) is claimed again key by key, so that one bad claim fails alone.
 */
export function createClaimGroups(options: ClaimGroupsOptions) {
  /** The claims waiting for a statement, first come first (a Set: a timed-out one leaves in O(1)). */
  const waiting = new Set<Waiter>();
  let inFlight = 0;

  /** Takes the next group off the queue: the first waiters with distinct keys, within the bounds. */
  function nextGroup(): Waiter[] {
    const group: Waiter[] = [];
    const keys = new Set<string>();
    let chars = 0;
    for (const waiter of waiting) {
      if (group.length === CLAIMS_PER_STATEMENT) break;
      const size = waiter.request.payload.length;
      if (keys.has(waiter.key) || (group.length > 0 && chars + size > CLAIM_PAYLOAD_CHARS)) continue;
      group.push(waiter);
      keys.add(waiter.key);
      chars += size;
      waiting.delete(waiter);
    }
    return group;
  }

  async function send(group: Waiter[]): Promise<void> {
    let rows: ClaimRow[];
    try {
      rows = await options.run(group);
    } catch (error) {
      if (group.length > 1 && isDataError(error)) {
        // One by one, but not those whose callers have given up meanwhile.
        for (const waiter of group) if (!waiter.settled) await send([waiter]);
        return;
      }
      for (const waiter of group) waiter.settle(error);
      return;
    }
    const byKey = new Map(rows.map((row) => [row.key, row]));
    for (const waiter of group) {
      const row = byKey.get(waiter.key);
      if (row) waiter.settle(undefined, row);
      else waiter.settle(new Error('The claim statement returned no row for the key.'));
    }
  }

  function pump(): void {
    while (inFlight < CLAIMS_IN_FLIGHT && waiting.size > 0) {
      inFlight++;
      send(nextGroup()).finally(() => {
        inFlight--;
        pump();
      });
    }
  }

  return {
    /** Claims `key`: the row the claim statement left, or an error (a timeout included). */
    claim(key: string, request: ClaimRequest): Promise<ClaimRow> {
      return new Promise<ClaimRow>((resolve, reject) => {
        const waiter: Waiter = {
          key,
          request,
          settled: false,
          settle(error, row) {
            if (waiter.settled) return;
            waiter.settled = true;
            clearTimeout(timer);
            if (row) resolve(row);
            else reject(error);
          },
        };
        const timer = setTimeout(() => {
          waiting.delete(waiter);
          waiter.settle(new PostgresTimeoutError('claim', options.timeoutMs));
        }, options.timeoutMs);
        waiting.add(waiter);
        pump();
      });
    },
  };
}

/** Whether `error` is the server's refusal of a statement's data (SQLSTATE class 22, 23 or 54). */
function isDataError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^(22|23|54)/.test(code);
}

/** The claim's result, from the row its statement left. */
export function claimResult(row: ClaimRow): ClaimResult {
  if (row.last_claim === 'duplicate') {
    return row.state === 'processing'
      ? { status: 'duplicate', state: 'processing', owner: row.owner ?? '' }
      : { status: 'duplicate', state: 'done' };
  }
  return {
    status: 'claimed',
    previous: row.last_claim as 'new' | 'failed' | 'expired',
    attempts: row.attempts,
  };
}
