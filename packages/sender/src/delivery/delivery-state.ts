/**
 * The life of a delivery (a row of `deliveries`: one event to one URL). Each transition is one
 * statement under `./sql/`, in the file named after it, with two exceptions outside the delivery
 * layer: deleting an endpoint fails its pending deliveries (`endpoints/store.ts`,
 * `endpoint_deleted`: nothing could sign them), and `payhook listen`'s reports insert finished
 * deliveries to `cli:` destinations (`listen/record.ts`), which no worker claims.
 *
 * ```text
 *                write-event (with its event) | insert-deliveries (a redelivery)
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
 *    redelivery (lock-failed-deliveries picks the failures of a time window):            |
 *    insert-deliveries makes a new PENDING row, then supersede-event-failures or         |
 *    supersede-deliveries sets superseded_by on the FAILED one <-------------------------+
 *    (a recovery, recover-batches, does the same for an endpoint's failures)
 *
 *    HELD: a PENDING row of a disabled endpoint, moved past every claim's walk by
 *    held-deliveries (due at HELD_UNTIL); enabling the endpoint, or a recovery
 *    (recover-batches), makes it due again.
 *    GONE: remove-history deletes DELIVERED and FAILED rows with their event past the
 *    retention horizon; a PENDING row is never removed.
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
export { enqueueDeliveries } from './sql/insert-deliveries.js';
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
