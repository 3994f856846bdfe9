import type { Database } from './db/database.js';
import { writeEvent } from './delivery/outbox.js';
import type { Payment } from './http/payments.js';

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
      for (const row of rows) {
        const payment = {
          ...(row.data as Payment),
          status: 'failed',
          cancellation_reason: 'expired',
        } as Payment;
        await tx
          .updateTable('payments')
          .set({ status: 'failed', data: JSON.stringify(payment) })
          .where('id', '=', row.id)
          .execute();
        await writeEvent(tx, {
          type: 'payment.session.failed',
          businessId: row.business_id,
          mode: row.mode,
          payment,
        });
      }
      return rows.length;
    });
    expired += done;
    if (done < limit) return expired;
  }
}
