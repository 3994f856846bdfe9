import { type Kysely, type RawBuilder, type SqlBool, sql, type Transaction } from 'kysely';
import type { Schema } from '../../db/schema.js';
import { WAKE_COLUMN } from './wake-channel.js';

/**
 * The due time of a delivery held while its endpoint is disabled: pending, kept, never due. A real
 * timestamp (not `infinity`, which the drivers read as no date), past any other due time, so held
 * rows lie at the far end of the due index, where no claim's walk reaches.
 */
export const HELD_UNTIL = new Date('9999-01-01T00:00:00.000Z');

/** Whether a pending delivery's due time is {@link HELD_UNTIL}. */
export const isHeld = (nextAttemptAt: Date | string | null): boolean =>
  nextAttemptAt !== null && new Date(nextAttemptAt).getTime() >= HELD_UNTIL.getTime();

/**
 * The SQL condition "the delivery aliased `alias` is for an endpoint that is disabled": a probe of
 * the endpoint's primary key. A delivery with no endpoint (older than endpoints), or whose
 * endpoint was deleted, is not held by it.
 */
export function endpointDisabled(alias: string): RawBuilder<SqlBool> {
  return sql<SqlBool>`exists (select 1 from webhook_endpoints held_by
    where held_by.id = ${sql.ref(`${alias}.endpoint_id`)} and held_by.status = 'disabled')`;
}

/**
 * {@link endpointDisabled}, the endpoint's row locked `FOR SHARE` when it holds: a claim that
 * holds a delivery waits for an enabling that is committing, then reads the endpoint as it is
 * now, so no delivery is held after its endpoint's enabling resumed the others. Taken only for
 * the deliveries of disabled endpoints: other claims lock nothing more.
 */
export function endpointDisabledLocked(alias: string): RawBuilder<SqlBool> {
  return sql<SqlBool>`exists (select 1 from webhook_endpoints held_by
    where held_by.id = ${sql.ref(`${alias}.endpoint_id`)} and held_by.status = 'disabled' for share)`;
}

/**
 * Holds the pending deliveries of an endpoint being disabled, in the transaction that disables
 * it: each one not claimed now is due at {@link HELD_UNTIL}. Claims hold any others as they come
 * due (one in flight now, recorded after); holding them here at once spares the claims a backlog
 * of the endpoint's due rows to hold a claim's worth at a time. Returns how many it held.
 *
 * @example
 * ```ts
 * await db.transaction().execute(async (tx) => holdDeliveries(tx, endpoint.id));
 * ```
 */
export async function holdDeliveries(
  tx: Transaction<Schema> | Kysely<Schema>,
  endpointId: string,
): Promise<number> {
  const { rows } = await sql<{ held: string }>`with h as (
      update deliveries set next_attempt_at = ${HELD_UNTIL}
      where status = 'pending' and next_attempt_at < ${HELD_UNTIL} and claim_token is null
        and endpoint_id = ${endpointId}::uuid
      returning 1
    )
    select count(*)::text as held from h`.execute(tx);
  return Number(rows[0]?.held ?? 0);
}

/**
 * Resumes the deliveries held while an endpoint was disabled, in the caller's transaction (the one
 * that enables it): each is due at `now`, and its 48 hours count again from `now` (its first
 * attempt time is moved there; one never attempted keeps none, and its 48 hours start at its
 * first attempt). The retry schedule goes on from the attempts it has made. Wakes the workers
 * when the transaction commits. Returns how many it resumed.
 *
 * @example
 * ```ts
 * await db.transaction().execute(async (tx) => resumeHeldDeliveries(tx, endpoint.id, new Date()));
 * ```
 */
export async function resumeHeldDeliveries(
  tx: Transaction<Schema> | Kysely<Schema>,
  endpointId: string,
  now: Date,
): Promise<number> {
  const { rows } = await sql<{ resumed: string }>`with r as (
      update deliveries set next_attempt_at = ${now},
        first_attempt_at = case when first_attempt_at is null then null else ${now}::timestamptz end
      where status = 'pending' and next_attempt_at >= ${HELD_UNTIL} and endpoint_id = ${endpointId}::uuid
      returning 1
    )
    select count(*)::text as resumed, count(*) > 0 as ${WAKE_COLUMN}
    from r`.execute(tx);
  return Number(rows[0]?.resumed ?? 0);
}
