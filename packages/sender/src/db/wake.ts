// The wake-up of the delivery workers when deliveries are written, without a NOTIFY in the
// writer's transaction (docs/decisions.md, "Waking the workers after the commit").
//
// A transaction that calls `pg_notify` takes, at its commit, a lock on the database's notification
// queue and keeps it until the commit is durable: every transaction that notifies waits for the
// one before it to reach the disk. At 1,000 sessions a second that queue of commits, each behind
// the previous one's WAL flush, was the API's limit (backends seen waiting on a lock of type
// `object`, one flushing the WAL). So a statement that writes due deliveries returns a mark
// instead, the connection notes it, and once its transaction has committed (at once, for a
// statement outside a transaction) the workers of this process are woken directly and the other
// instances by one NOTIFY at a time, sent outside any request's transaction, on a connection whose
// commits do not wait for the disk.
import { randomBytes } from 'node:crypto';

/** The channel on which the delivery workers of other instances are woken (payload: the waker's id). */
export const WAKE_CHANNEL = 'payhook_deliveries';

/**
 * The column a statement returns, true in its first row, when it wrote deliveries that are due: its
 * connection wakes the workers once the statement's transaction commits (nothing on a rollback).
 */
export const WAKE_MARK = 'payhook_wake';

/** Whether a statement's result says to wake the workers: {@link WAKE_MARK} true in its first row. */
export function marksWake(rows: readonly unknown[] | undefined): boolean {
  // A text of several statements answers an array of results, without rows of its own: no mark.
  const first = Array.isArray(rows) ? rows[0] : undefined;
  return (
    typeof first === 'object' && first !== null && (first as Record<string, unknown>)[WAKE_MARK] === true
  );
}

/** What one connection saw of the wake mark in the transaction it is in. */
export interface WakeTracker {
  /** Called with every statement's text before it runs. */
  before(text: string): void;
  /** Called with every statement's text and result once it succeeded. */
  after(text: string, marked: boolean): void;
  /** The transaction is over without a commit (a statement failed and the connection is dropped). */
  reset(): void;
}

/** Signals that deliveries were committed: to this process's listeners, and to other instances. */
export interface WakeSignal {
  /** This signal's id: the payload of its NOTIFY, so that it ignores its own. */
  readonly id: string;
  /** Wakes the listeners here now, and the other instances by a NOTIFY (one at a time). */
  fire(): void;
  /** Calls `listener` at every wake-up of this process; returns the function that stops it. */
  subscribe(listener: () => void): () => void;
  /** A tracker for one connection: fires after a commit of a transaction that wrote the mark. */
  tracker(): WakeTracker;
}

const BEGIN = /^\s*(begin|start transaction)\b/i;
const COMMIT = /^\s*(commit|end)\s*;?\s*$/i;
const ROLLBACK = /^\s*rollback\s*;?\s*$/i;

/**
 * Creates the wake signal of one opened database. `notifyOthers`, when given (PostgreSQL), sends
 * the NOTIFY that wakes the other instances' workers: never more than one under way, and one more
 * after it when a wake-up came meanwhile, so a burst of commits costs a few NOTIFYs, not one each.
 *
 * @example
 * ```ts
 * const wake = createWakeSignal((id) => notify(id));
 * wake.subscribe(() => worker.wake());
 * ```
 */
export function createWakeSignal(notifyOthers?: (id: string) => Promise<void>): WakeSignal {
  const id = randomBytes(8).toString('hex');
  const listeners = new Set<() => void>();
  let sending = false;
  let again = false;

  async function send(notify: (id: string) => Promise<void>): Promise<void> {
    if (sending) {
      again = true;
      return;
    }
    sending = true;
    try {
      do {
        again = false;
        // A failed NOTIFY (the database away) costs the other instances their poll's wait only.
        await notify(id).catch(() => {});
      } while (again);
    } finally {
      sending = false;
    }
  }

  const signal: WakeSignal = {
    id,
    fire() {
      for (const listener of listeners) listener();
      if (notifyOthers) void send(notifyOthers);
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    tracker() {
      let inTransaction = false;
      let marked = false;
      return {
        before(text) {
          if (BEGIN.test(text)) {
            inTransaction = true;
            marked = false;
          }
        },
        after(text, wake) {
          if (COMMIT.test(text)) {
            const fire = marked;
            inTransaction = false;
            marked = false;
            if (fire) signal.fire();
          } else if (ROLLBACK.test(text)) {
            inTransaction = false;
            marked = false;
          } else if (wake) {
            if (inTransaction) marked = true;
            else signal.fire();
          }
        },
        reset() {
          inTransaction = false;
          marked = false;
        },
      };
    },
  };
  return signal;
}

/**
 * `wake`, at most once per `windowMs`: a call after a quiet window wakes at once and opens a
 * window; the calls within it are served by one call at its end, which opens the next. So a lone
 * commit is claimed without delay, and commits that come faster than the window share its claim.
 * `cancel` closes an open window without calling.
 *
 * @example
 * ```ts
 * const newRows = windowed(() => worker.wake(), 8);
 * wake.subscribe(newRows.wake);
 * ```
 */
export function windowed(wake: () => void, windowMs: number): { wake(): void; cancel(): void } {
  let open: NodeJS.Timeout | undefined;
  let waiting = false;
  const close = () => {
    open = undefined;
    if (!waiting) return;
    waiting = false;
    wake();
    open = setTimeout(close, windowMs);
  };
  return {
    wake() {
      if (open) {
        waiting = true;
        return;
      }
      wake();
      open = setTimeout(close, windowMs);
    },
    cancel() {
      clearTimeout(open);
      open = undefined;
      waiting = false;
    },
  };
}
