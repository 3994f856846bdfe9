import type { Kysely, Transaction } from 'kysely';
import type { Mode, Schema } from '../db/schema.js';
import { writeEvent } from '../delivery/outbox.js';
import { ApiError } from '../errors.js';
import { UUID } from '../ids.js';
import type { Payment } from './payment.js';

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
  if (!row) throw new ApiError('not_found', `No payment session ${JSON.stringify(id)}.`);
  return row;
}

/** The fields a state change reads of a locked payment row. */
export type LockedPayment = Pick<SessionRow, 'id' | 'business_id' | 'mode' | 'data'>;

/**
 * Moves a locked payment to `status` (with `changes` to its fields) in the caller's transaction,
 * and writes `event` for it if given: the one place a payment's state changes after creation.
 */
export async function transition(
  tx: Transaction<Schema>,
  row: LockedPayment,
  status: 'captured' | 'settled' | 'failed',
  options: { event?: string; changes?: Partial<Payment> } = {},
): Promise<Payment> {
  const payment = { ...(row.data as Payment), ...options.changes, status } as Payment;
  await tx
    .updateTable('payments')
    .set({ status, data: JSON.stringify(payment) })
    .where('id', '=', row.id)
    .execute();
  if (options.event) {
    await writeEvent(tx, { type: options.event, businessId: row.business_id, mode: row.mode, payment });
  }
  return payment;
}

/** Moves a locked payment to `failed` with a reason, and writes its `payment.session.failed` event. */
export function failSession(tx: Transaction<Schema>, row: LockedPayment, reason: string): Promise<Payment> {
  return transition(tx, row, 'failed', {
    event: 'payment.session.failed',
    changes: { cancellation_reason: reason } as Partial<Payment>,
  });
}

/**
 * Moves a locked pending payment to `captured`: the customer paid and the funds arrived. No event:
 * the service's events are created, succeeded (on `settled`) and failed.
 */
export function receiveFunds(tx: Transaction<Schema>, row: LockedPayment): Promise<Payment> {
  return transition(tx, row, 'captured');
}

/** Moves a locked `captured` payment to `settled` (credited to the business), with `payment.session.succeeded`. */
export function settleSession(tx: Transaction<Schema>, row: LockedPayment): Promise<Payment> {
  return transition(tx, row, 'settled', { event: 'payment.session.succeeded' });
}
