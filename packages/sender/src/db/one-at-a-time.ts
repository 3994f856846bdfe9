/** Passes run one after another (see {@link oneAtATime}). */
export interface OneAtATime<T, A extends unknown[] = []> {
  /** Runs a pass (given `args`) after those asked for before it have settled; resolves with what it did. */
  run(...args: A): Promise<T>;
  /** The last pass asked for, settled either way; undefined when none runs or waits. */
  busy(): Promise<void> | undefined;
}

/**
 * Runs `pass` one at a time, each call its own pass after the ones before it (their failures go to
 * their own callers, never to the next): the database maintenance's and the retention's passes,
 * whose `stop()` waits for `busy()` and whose timers skip a tick while it is set.
 *
 * @example
 * ```ts
 * const passes = oneAtATime(pass);
 * const report = await passes.run();
 * ```
 */
export function oneAtATime<T, A extends unknown[] = []>(pass: (...args: A) => Promise<T>): OneAtATime<T, A> {
  let last: Promise<void> | undefined;
  return {
    run(...args) {
      const previous = last;
      const next = (async () => {
        await previous;
        return pass(...args);
      })();
      const settled: Promise<void> = next.then(
        () => {},
        () => {},
      );
      last = settled;
      void settled.then(() => {
        if (last === settled) last = undefined;
      });
      return next;
    },
    busy: () => last,
  };
}
