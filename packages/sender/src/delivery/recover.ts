import { type Kysely, sql, type Transaction } from 'kysely';
import type { Schema } from '../db/schema.js';
import { type Gap, type HistoryRow, missedGaps } from './recover-gaps.js';
import {
  type Cursor,
  type ReadBatch,
  type RecoveredEndpoint,
  type RecoverWindow,
  type Recovery,
  replaceFailed,
  resumeHeld,
  sendMissed,
} from './sql/recover-batches.js';

export type { RecoveredEndpoint, Recovery } from './sql/recover-batches.js';

/** How far back a recovery may reach: events created at most this many days ago. */
export const RECOVER_MAX_DAYS = 14;

/** Rows a recovery reads per statement (and per transaction). */
export const RECOVER_BATCH = 2000;

/** One kind of work of a recovery, read in batches. */
interface Source {
  batch: ReadBatch;
  /** Whether it may have anything to read: asked, before it starts, in the previous batch's transaction. */
  any(tx: Transaction<Schema>): Promise<boolean>;
}

const sum = (a: Recovery, b: Recovery): Recovery => ({
  queued: a.queued + b.queued,
  created: a.created + b.created,
  resumed: a.resumed + b.resumed,
});

const exists = async (tx: Transaction<Schema>, query: ReturnType<typeof sql>) =>
  (await sql<{ found: boolean }>`select exists (${query}) as found`.execute(tx)).rows[0]?.found === true;

/** What a recovery of `endpoint` over `window` reads, in order. */
function sources(endpoint: RecoveredEndpoint, window: RecoverWindow, gaps: readonly Gap[]): Source[] {
  return [
    {
      batch: resumeHeld(endpoint, window),
      any: (tx) =>
        exists(
          tx,
          sql`select 1 from deliveries where endpoint_id = ${endpoint.id}::uuid and status = 'pending'
          and attempts = 0 and claim_token is null`,
        ),
    },
    {
      batch: replaceFailed(endpoint, window),
      any: (tx) =>
        exists(
          tx,
          sql`select 1 from deliveries where endpoint_id = ${endpoint.id}::uuid and status = 'failed'
          and superseded_by is null and created_at >= ${window.since}`,
        ),
    },
    ...gaps.map(
      (gap): Source => ({
        batch: sendMissed(endpoint, { since: gap.from, until: gap.until, now: window.now }, gap.types),
        // Read to know: its first batch is as cheap as a look.
        any: async () => true,
      }),
    ),
  ];
}

/**
 * Recovers a window of an endpoint's events: every event of its business and mode created in
 * `[since, until)` that the endpoint's filter takes is sent to it again when it was never
 * delivered there, each as a delivery with its own 48 hours:
 * - a delivery held while the endpoint was disabled (pending, never attempted) is made due now;
 * - a failed delivery (not redelivered yet) gets a new delivery in its place, marked as replaced
 *   (`superseded_by`), as a redelivery does;
 * - an event that has no delivery to the endpoint (made while it was disabled, or while its
 *   filter left the type out) gets one, if the endpoint existed when the event was made.
 * An event delivered to the endpoint, or still being tried there, is left alone: a recovery never
 * sends a delivered event again. Deliveries older than endpoints (no endpoint, the same URL)
 * count as the endpoint's.
 *
 * It reads only what could need it (docs/decisions.md, "Recover reads what could have been
 * missed"): the endpoint's held deliveries and its failures, through their indexes, and the
 * events of the times its history (`endpoint_history`) says some could lack a delivery
 * (`recover-gaps.ts`), not every event of the window. Each in batches of {@link RECOVER_BATCH}
 * rows, each batch one statement (`sql/recover-batches.ts`) whose changes commit in their own
 * transaction, holding the endpoint's row: two recoveries of one endpoint take turns batch by
 * batch. A recovery cut short has queued what its batches committed, and running it again queues
 * the rest. `onDone` runs in the transaction of the last batch; `onProgress` after each other.
 * A disabled endpoint's recovered deliveries are held with its others until it is enabled.
 *
 * @example
 * ```ts
 * const { queued } = await recoverEndpoint(database.db, endpoint, { since, until: new Date(), now: new Date() });
 * ```
 */
export async function recoverEndpoint(
  db: Kysely<Schema>,
  endpoint: RecoveredEndpoint,
  window: RecoverWindow,
  options: {
    /** Rows read per batch (default {@link RECOVER_BATCH}). */
    batch?: number;
    /** Called after each batch but the last, with the rows read so far. */
    onProgress?: (progress: { rows: number } & Recovery) => void;
    /**
     * Run in the last batch's transaction with what the recovery queued in all: what must
     * commit with its last write (the response stored under an Idempotency-Key).
     */
    onDone?: (tx: Transaction<Schema>, recovery: Recovery) => Promise<void>;
  } = {},
): Promise<Recovery> {
  const size = options.batch ?? RECOVER_BATCH;
  const history = await db
    .selectFrom('endpoint_history')
    .select(['at', 'status', 'enabled_events'])
    .where('endpoint_id', '=', endpoint.id)
    .orderBy('at')
    .execute();
  const work = sources(endpoint, window, missedGaps(endpoint, history as HistoryRow[], window));
  let total: Recovery = { queued: 0, created: 0, resumed: 0 };
  let rows = 0;
  let at = 0;
  let cursor: Cursor | null = null;
  for (;;) {
    const step = await db.transaction().execute(async (tx) => {
      await sql`select 1 from webhook_endpoints where id = ${endpoint.id}::uuid for update`.execute(tx);
      const source = work[at];
      const batch = source ? await source.batch(tx, cursor, size) : null;
      let next = at;
      let nextCursor = batch?.last ?? null;
      if (!batch || batch.read < size || batch.last === null) {
        // This source is read: on to the next that may have something.
        next = at + 1;
        nextCursor = null;
        while (next < work.length && !(await (work[next] as Source).any(tx))) next++;
      }
      const done = batch?.done ?? { queued: 0, created: 0, resumed: 0 };
      if (next >= work.length) await options.onDone?.(tx, sum(total, done));
      return { batch, next, nextCursor, done };
    });
    total = sum(total, step.done);
    rows += step.batch?.read ?? 0;
    if (step.next >= work.length) return total;
    at = step.next;
    cursor = step.nextCursor;
    if (step.batch?.read) options.onProgress?.({ rows, ...total });
  }
}
