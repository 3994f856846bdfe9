import type { WorkerLogger } from './logger.js';
import { ORPHAN_SWEEPS_MS } from './tuning.js';

export { ORPHAN_SWEEPS_MS };

/** The sweeps of one worker for the claims it made and does not hold. */
export interface OrphanSweeps {
  /** A statement failed, or the database came back: sweep at the next pass, and at each of {@link ORPHAN_SWEEPS_MS}. */
  schedule(): void;
  /** Called at the start of each pass of claims: sweeps if one is due. */
  runIfDue(): Promise<void>;
  /** Cancels the sweeps to come (the worker stops). */
  stop(): void;
}

/**
 * The sweeps for orphaned claims. After a statement failed or the database came back, a worker
 * may have claims it does not hold: a claim cut short that committed on the server all the same
 * (even after a frozen server thawed), an attempt whose signing or record failed, rows whose
 * release failed. Each would wait for its lease to end, a minute late. The next pass gives them
 * back, due now (`release`, the claimer's), and so do the passes {@link ORPHAN_SWEEPS_MS} later
 * (once per failure, not again while those are to come): a claim that a thawed server commits
 * after one sweep is caught by a later one. A sweep runs inside a pass of claims (`runIfDue`, at
 * its start), never beside a claim of the same worker, whose rows it would take back.
 *
 * @example
 * ```ts
 * const sweeps = createOrphanSweeps({ release: () => claimer.releaseOrphans(now()), wake, log });
 * pump.run().catch(() => sweeps.schedule());
 * ```
 */
export function createOrphanSweeps(options: {
  /** Gives back the worker's claims it does not hold; resolves with how many. */
  release: () => Promise<number>;
  /** Runs a pass of claims soon (which calls `runIfDue`). */
  wake: () => void;
  log: WorkerLogger;
}): OrphanSweeps {
  const { release, wake, log } = options;
  let due = false;
  let stopped = false;
  const timers = new Set<NodeJS.Timeout>();
  return {
    schedule() {
      due = true;
      if (timers.size > 0 || stopped) return;
      for (const ms of ORPHAN_SWEEPS_MS) {
        const timer = setTimeout(() => {
          timers.delete(timer);
          due = true;
          wake();
        }, ms);
        timer.unref();
        timers.add(timer);
      }
    },
    async runIfDue() {
      if (!due) return;
      due = false;
      try {
        const released = await release();
        if (released > 0)
          log.info({ released }, 'gave back deliveries this worker claimed and does not hold');
      } catch (error) {
        // Due again at the next pass; the pass's own failure is logged by the worker.
        due = true;
        throw error;
      }
    },
    stop() {
      stopped = true;
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
    },
  };
}
