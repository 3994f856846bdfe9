import type { Transaction } from 'kysely';
import type { Database } from './db/database.js';
import type { Mode, Schema } from './db/schema.js';
import type { Payment } from './payments/payment.js';
import { failSession } from './payments/session-state.js';

/**
 * Fails one pending session as expired (`cancellation_reason: "expired"`) and writes its
 * `payment.session.failed` event, in the caller's transaction, which must hold the row locked and
 * have checked that it is pending. The sweeper, a capture that finds its session expired and the
 * sandbox's expire route all go through here. Returns the failed payment.
 *
 * @example
 * ```ts
 * await db.transaction().execute(async (tx) => {
 *   const row = await tx.selectFrom('payments').select(['id', 'business_id', 'mode', 'data'])
 *     .where('id', '=', id).where('status', '=', 'pending').forUpdate().executeTakeFirstOrThrow();
 *   await expireSession(tx, row);
 * });
 * ```
 */
export function expireSession(
  tx: Transaction<Schema>,
  row: { id: string; business_id: string; mode: Mode; data: Record<string, unknown> },
): Promise<Payment> {
  return failSession(tx, row, 'expired');
}

/**
 * Fails the sessions whose `expires_at` has passed without payment (`cancellation_reason:
 * "expired"`), each with its `payment.session.failed` event, in one transaction per session.
 * Safe to run from several instances at once (rows are locked and skipped when taken).
 * Returns how many it expired.
 *
 * @example
 * ```ts
 * setInterval(() => void expireSessions(database), 30_000).unref();
 * ```
 */
export async function expireSessions(
  database: Database,
  now: Date = new Date(),
  limit = 100,
): Promise<number> {
  let expired = 0;
  for (;;) {
    const done = await database.db.transaction().execute(async (tx) => {
      const rows = await tx
        .selectFrom('payments')
        .select(['id', 'business_id', 'mode', 'data'])
        .where('status', '=', 'pending')
        .where('expires_at', '<=', now)
        .orderBy('expires_at')
        .limit(limit)
        .forUpdate()
        .skipLocked()
        .execute();
      for (const row of rows) await expireSession(tx, row);
      return rows.length;
    });
    expired += done;
    if (done < limit) return expired;
  }
}
