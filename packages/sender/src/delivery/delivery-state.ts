/**
 * The life of a delivery (a row of `deliveries`: one event to one URL). Each transition is one
 * statement under `./sql/`, in the file named after it, exported here; nothing else writes the
 * table (`scripts/check-structure.mjs` fails on a statement that does). Callers outside the
 * delivery layer reach it through this module: an endpoint's lifecycle holds, resumes and ends
 * its deliveries (`endpoints/lifecycle.ts`), and `payhook listen`'s reports insert finished ones
 * (`listen/record.ts`).
 *
 * ```text
 *     write-event (with its event) | insert-deliveries (a redelivery, a recovery's new rows)
 *                                     |
 *                                     v
 *            +-------------> PENDING, unclaimed <------------------------------+
 *            |                  (due at next_attempt_at)                       |
 *            |                        |                                        |
 *            |   release              | claim-deliveries: FOR UPDATE SKIP      | record-attempts:
 *            |   (set-due: due now,   | LOCKED, a new claim_token, due at      | a failed attempt,
 *            |   token cleared)       | the end of the lease                   | due at its retry
 *            |                        v                                        |
 *            +-------------- PENDING, claimed ---------------------------------+
 *                          (claim_token; due at lease end)
 *                           |     ^    |
 *               renew       +-----+    | a lease that passes unrenewed makes the row due again:
 *               (set-due: lease end    | any worker claims it anew, and the old token's record
 *               moved on)              | changes nothing
 *                                      | record-attempts (its claim_token must still match)
 *                         +------------+----------------+
 *                         v                             v
 *                     DELIVERED                       FAILED ----------------------------+
 *                   (HTTP 200; finished_at)   (the attempt at the 48 h deadline          |
 *                                              failed; finished_at)                      |
 *                                                                                        |
 *    SUPERSEDED: a redelivery (lock-failed-deliveries picks the failures of a time       |
 *    window) makes a new PENDING row with insert-deliveries, then                        |
 *    supersede-event-failures or supersede-deliveries sets superseded_by on the          |
 *    FAILED one; a recovery (recover-batches) does the same for an endpoint's <----------+
 *    failures in its window. A superseded row stays FAILED, with its attempts.
 *
 *    HELD: a PENDING row of a disabled endpoint, due at HELD_UNTIL, past every claim's walk.
 *      PENDING, unclaimed --hold--> HELD: held-deliveries, in the transaction that disables
 *        the endpoint (the API's or the sweeper's); claim-deliveries, for a due row of a
 *        disabled endpoint it reads (one in flight when its endpoint was disabled, due again
 *        after its record).
 *      HELD --resume--> PENDING, unclaimed: held-deliveries, in the transaction that enables
 *        the endpoint (due now, a fresh 48 hours); recover-batches, in a recovery (due now).
 *
 *    ENDPOINT DELETED: end-deleted-endpoints fails every PENDING row (HELD or claimed too)
 *    of an endpoint deleted through the API, or of one with its own secrets that the
 *    settings' webhook_urls left out (last_error endpoint_deleted: nothing could sign it),
 *    in the deleting transaction; a claim's record then finds its token gone.
 *
 *    LISTENER'S REPORT: insert-listener-deliveries inserts a row already DELIVERED or
 *    FAILED, with its one attempt, to a `cli:` destination; it is never PENDING.
 *
 *    GONE: remove-history deletes DELIVERED and FAILED rows with their event past the
 *    retention horizon; a PENDING row (HELD too) is never removed.
 *
 *    ORPHANED: release-orphaned-claims makes a claimed row due now again when the worker
 *    that claimed it never heard its claim back (cut short by a lost connection, committed
 *    on the server): PENDING, claimed, back to PENDING, unclaimed.
 * ```
 *
 * One move leaves a row unclaimed: claim-deliveries paces the due rows it reads of a URL that holds
 * all it may (the worker names it), moving each to its turn at the URL's pace, later, so that the
 * next claims read past that URL's backlog (docs/decisions.md, "One URL's backlog").
 *
 * Every claim, renewal, release and record runs through `database.delivery` (the worker's
 * planner settings and connections); the inserts and supersessions run in the API's transaction
 * with the state change that caused them, and wake the workers when it commits (their statements
 * return the wake mark, {@link WAKE}: `db/wake.ts` wakes this process at once and the other
 * instances on {@link WAKE_CHANNEL}). The schedule of retries is `./schedule.ts`; the worker
 * that drives these transitions is `./worker.ts`.
 */

export type { Claim, ClaimOptions, ClaimResult, PacedUrl } from './sql/claim-deliveries.js';
export { claimDeliveries, otherUrlsDue } from './sql/claim-deliveries.js';
export { endDeletedEndpoints } from './sql/end-deleted-endpoints.js';
export { holdDeliveries, resumeHeldDeliveries } from './sql/held-deliveries.js';
export { enqueueDeliveries } from './sql/insert-deliveries.js';
export type { ListenerDeliveryRow } from './sql/insert-listener-deliveries.js';
export { insertListenerDeliveries } from './sql/insert-listener-deliveries.js';
export type { FailedSince } from './sql/lock-failed-deliveries.js';
export { lockFailedDeliveries } from './sql/lock-failed-deliveries.js';
export type { AttemptRecord } from './sql/record-attempts.js';
export { recordAttemptsStatement } from './sql/record-attempts.js';
export { releaseOrphanedClaims } from './sql/release-orphaned-claims.js';
export { releaseClaims, renewLeases } from './sql/set-due.js';
export { supersedeDeliveries } from './sql/supersede-deliveries.js';
export { supersedeEventFailures } from './sql/supersede-event-failures.js';
export { WAKE, WAKE_CHANNEL } from './sql/wake-channel.js';
export type { EventRow } from './sql/write-event.js';
export { writeEventStatement } from './sql/write-event.js';
