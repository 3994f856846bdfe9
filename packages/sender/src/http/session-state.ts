import type { Kysely, Transaction } from 'kysely';
import type { Mode, Schema } from '../db/schema.js';
import { writeEvent } from '../delivery/outbox.js';
import { ApiError } from './errors.js';
import { type Payment, UUID } from './payments.js';

/** A payment session as the capture and sandbox routes read it (locked for update). */
export interface SessionRow {
  id: string;
  business_id: string;
  mode: Mode;
  data: Record<string, unknown>;
  status: string;
  method_type: string | null;
  expires_at: Date;
  captured_at: Date | null;
  auth_type: string | null;
  links: Record<string, string>;
}

/** Loads a session of this business and mode for update, or 404 (a malformed id included). */
export async function lockSession(
  tx: Transaction<Schema> | Kysely<Schema>,
  id: string,
  businessId: string,
  mode: Mode,
): Promise<SessionRow> {
  const row = UUID.test(id)
    ? await tx
        .selectFrom('payments')
        .select([
          'id',
          'business_id',
          'mode',
          'data',
          'status',
          'method_type',
          'expires_at',
          'captured_at',
          'auth_type',
          'links',
        ])
        .where('id', '=', id)
        .where('business_id', '=', businessId)
        .where('mode', '=', mode)
        .forUpdate()
        .executeTakeFirst()
    : undefined;
  if (!row) throw new ApiError(404, 'not_found', `No payment session ${JSON.stringify(id)}.`);
  return row;
}

/** Moves a locked payment to `failed` with a reason, and writes its `payment.session.failed` event. */
export async function failSession(
  tx: Transaction<Schema>,
  row: SessionRow,
  reason: string,
): Promise<Payment> {
  const payment = { ...(row.data as Payment), status: 'failed', cancellation_reason: reason } as Payment;
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
  return payment;
}

/**
 * Moves a locked pending payment to `captured`: the customer paid and the funds arrived. No event:
 * DESIGN.md's events are created, succeeded (on `settled`) and failed.
 */
export async function receiveFunds(tx: Transaction<Schema>, row: SessionRow): Promise<Payment> {
  const payment = { ...(row.data as Payment), status: 'captured' } as Payment;
  await tx
    .updateTable('payments')
    .set({ status: 'captured', data: JSON.stringify(payment) })
    .where('id', '=', row.id)
    .execute();
  return payment;
}

/** Moves a locked `captured` payment to `settled` (credited to the business), with `payment.session.succeeded`. */
export async function settleSession(tx: Transaction<Schema>, row: SessionRow): Promise<Payment> {
  const payment = { ...(row.data as Payment), status: 'settled' } as Payment;
  await tx
    .updateTable('payments')
    .set({ status: 'settled', data: JSON.stringify(payment) })
    .where('id', '=', row.id)
    .execute();
  await writeEvent(tx, {
    type: 'payment.session.succeeded',
    businessId: row.business_id,
    mode: row.mode,
    payment,
  });
  return payment;
}
