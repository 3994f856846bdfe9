/** A loop that runs its passes one at a time (see {@link serialPasses}). */
export interface SerialPasses {
  /** Runs a pass, or asks for one more after the pass under way; resolves when they end. */
  run(): Promise<number>;
  /** The passes under way, if any. */
  current(): Promise<number> | undefined;
}

/**
 * Runs `pass` one at a time, for the delivery worker's claim loop: a call while a pass runs asks
 * for one more after it (however many calls came) and gets the promise of the passes under way,
 * which resolves with how many attempts they started. No pass follows once `halted()` is true.
 *
 * @example
 * ```ts
 * const pump = serialPasses(fill, () => stopping);
 * pump.run().catch(log);
 * ```
 */
export function serialPasses(pass: () => Promise<number>, halted: () => boolean): SerialPasses {
  let pumping: Promise<number> | undefined;
  /** A call came during the current pass: run another after it. */
  let again = false;
  return {
    run() {
      if (pumping) {
        again = true;
        return pumping;
      }
      pumping = (async () => {
        let started = 0;
        do {
          again = false;
          started += await pass();
        } while (again && !halted());
        return started;
      })().finally(() => {
        pumping = undefined;
      });
      return pumping;
    },
    current: () => pumping,
  };
}
