import { ref, type Timer, unref } from './timers.js';

/** A time by which something must have finished, and what to do if it has not. */
export interface Deadline {
  /** `performance.now()` time. */
  at: number;
  expire(): void;
}

/**
 * Handler timeouts. Attempts start in order and share one timeout, so their deadlines come in
 * order too: one timer, armed for the oldest, serves them all (a timer per attempt showed in
 * profiles; docs/decisions.md, "The receiver's queue").
 */
export function createDeadlines() {
  const deadlines = new Set<Deadline>();
  let timer: Timer | undefined;
  let timerAt = 0;

  const onTimer = () => {
    timer = undefined;
    const now = performance.now();
    for (const deadline of deadlines) {
      if (deadline.at > now) {
        arm(deadline.at);
        return;
      }
      deadlines.delete(deadline);
      deadline.expire();
    }
  };
  const arm = (at: number) => {
    timerAt = at;
    timer = setTimeout(onTimer, Math.max(0, at - performance.now()));
  };

  return {
    watch(deadline: Deadline): void {
      deadlines.add(deadline);
      if (timer === undefined) {
        arm(deadline.at);
      } else if (timerAt > deadline.at) {
        clearTimeout(timer);
        arm(deadline.at);
      } else {
        // Armed for an earlier deadline: it fires first, then re-arms for this one.
        ref(timer);
      }
    },
    unwatch(deadline: Deadline): void {
      deadlines.delete(deadline);
      // Nothing left to time out: the timer stays armed (it finds nothing to do) but no longer
      // keeps the process alive.
      if (deadlines.size === 0) unref(timer);
    },
  };
}

export type Deadlines = ReturnType<typeof createDeadlines>;
