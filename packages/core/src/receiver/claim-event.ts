import type { ClaimResult, IdempotencyStore } from '../store/types.js';
import type { Logger } from './logger.js';
import type { ErrorInfo } from './types.js';
import type { Admission, Job, WorkQueue } from './work-queue.js';

/**
 * How claiming an event for this instance ended:
 * - `claimed`: the store gave it to this instance and the queue holds it as `accepted`;
 * - `stored`: the store has it already (`done`, or `processing` under another live lease);
 * - the admission kinds but `admitted` (`duplicate`, `pending`, `full`, `closing`): the work queue
 *   decided before the store was asked (see {@link Admission});
 * - `unavailable`: the store could not answer; nothing is held.
 */
export type EventClaim =
  | { kind: 'claimed' }
  | { kind: 'stored'; state: Extract<ClaimResult, { status: 'duplicate' }>['state'] }
  | Exclude<Admission, { kind: 'admitted' }>
  | { kind: 'unavailable'; error: unknown };

/** What claiming events needs from the receiver. */
export interface EventClaimOptions {
  work: WorkQueue;
  store: IdempotencyStore;
  instanceId: string;
  leaseMs: number;
  logger: Logger;
  reportError(error: unknown, info: ErrorInfo): void;
}

const CLAIMED: EventClaim = { kind: 'claimed' };

/**
 * The one way an event becomes this instance's, for a request (`handle`) and for `replay` alike:
 * admission by the work queue (of concurrent copies exactly one asks the store), the store's
 * claim, and the queue told the answer, whatever it is, so that no admitted key stays held.
 */
export function createEventClaim(options: EventClaimOptions) {
  const { work, store, instanceId, leaseMs, logger, reportError } = options;

  /**
   * The store holds `key` under this instance's own token, yet this instance holds nothing under
   * it (admission let this request claim it): an earlier claim of this instance timed out, was
   * answered 503, and then reached the store. The event is taken back at once rather than left to
   * recovery when the lease lapses; `renew` passes only while this instance's lease is live, so no
   * other instance can have it meanwhile.
   */
  const adoptLateClaim = async (
    key: string,
    claim: Extract<ClaimResult, { status: 'duplicate' }>,
  ): Promise<boolean> => {
    if (claim.state !== 'processing' || claim.owner !== instanceId) return false;
    try {
      if (!(await store.renew(key, instanceId, leaseMs))) return false;
    } catch (error) {
      // Unsure: the lease lapses and recovery finishes the event.
      reportError(error, { key, phase: 'store' });
      return false;
    }
    logger.info({ key }, 'payhook: a claim of this instance that ran late was taken back');
    return true;
  };

  /**
   * Claims `key` with its verified `payload` (the text another instance would process) for the
   * job `makeJob` builds, called only once the event is this instance's.
   */
  return async function claimEvent(
    key: string,
    payload: string,
    businessId: string,
    makeJob: () => Job,
  ): Promise<EventClaim> {
    const admission = work.admit(key, payload.length);
    if (admission.kind !== 'admitted') return admission;
    let claim: ClaimResult;
    try {
      claim = await store.claim(key, { owner: instanceId, leaseMs, payload, businessId });
    } catch (error) {
      work.decide(key, 'failed');
      return { kind: 'unavailable', error };
    }
    if (claim.status === 'duplicate' && !(await adoptLateClaim(key, claim))) {
      work.decide(key, 'duplicate');
      return { kind: 'stored', state: claim.state };
    }
    work.decide(key, 'claimed', makeJob());
    return CLAIMED;
  };
}
