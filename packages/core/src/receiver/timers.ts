/**
 * A timer as `setTimeout` and `setInterval` return it: an object with `ref` and `unref` on Node,
 * Bun and Deno, a number on Workers and in browsers.
 */
export type Timer = ReturnType<typeof setTimeout>;

type Refable = { ref?: () => void; unref?: () => void };

/** Lets the process exit while `timer` is armed, on runtimes that keep a process alive for one. */
export function unref(timer: Timer | undefined): void {
  (timer as Refable | undefined)?.unref?.();
}

/** Makes `timer` keep the process alive again, on runtimes that do. */
export function ref(timer: Timer | undefined): void {
  (timer as Refable | undefined)?.ref?.();
}

/**
 * Runs `run` in the check phase of the event loop, after the I/O of this turn (`setImmediate`),
 * or on a zero-delay timer where there is no `setImmediate` (Workers without `nodejs_compat`,
 * browsers).
 */
export const afterThisTurn: (run: () => void) => void =
  typeof setImmediate === 'function'
    ? (run) => {
        setImmediate(run);
      }
    : (run) => {
        setTimeout(run, 0);
      };
