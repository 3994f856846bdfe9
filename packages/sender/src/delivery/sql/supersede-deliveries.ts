import { type Kysely, type RawBuilder, sql, type Transaction } from 'kysely';
import type { Schema } from '../../db/schema.js';
import { isWebhookUrl } from '../destination.js';

/**
 * Marks deliveries as replaced, pairwise: the delivery that `match` finds for each of `keys` (of
 * SQL type `keyType`, `m.key` in `match`) by the one of `newIds` at its place; then clears the
 * `failed_delivery` mark of their events that have no failure left. The pairs are arrays
 * unnested, which the planner counts, rather than a JSON recordset it guesses at 100 rows: a guess
 * that made it scan the deliveries rather than look each up.
 *
 * @example
 * ```ts
 * await supersedePairs(tx, oldIds, 'uuid', newIds, sql`d.id = m.key`);
 * ```
 */
export async function supersedePairs(
  tx: Transaction<Schema> | Kysely<Schema>,
  keys: readonly string[],
  keyType: 'uuid' | 'text',
  newIds: readonly string[],
  match: RawBuilder<unknown>,
): Promise<void> {
  const { rows } = await sql<{ event_id: string }>`
            update deliveries d set superseded_by = m.new_id
            from unnest(${keys}::${sql.raw(keyType)}[], ${newIds}::uuid[]) as m(key, new_id)
            where ${match}
            returning d.event_id`.execute(tx);
  await clearFailedMarks(tx, [...new Set(rows.map((r) => r.event_id))]);
}

/**
 * Clears the `failed_delivery` mark of those of `eventIds` left with no failure not sent again.
 * Their rows are locked first, and the failures read by the next statement, in a snapshot taken
 * once the lock is held: a delivery failing meanwhile marks its event under the same lock (see
 * recordAttemptsStatement), so its mark is either seen here or written after this clear.
 */
async function clearFailedMarks(tx: Transaction<Schema> | Kysely<Schema>, eventIds: readonly string[]) {
  if (eventIds.length === 0) return;
  await sql`select from events where id = any(${eventIds}::uuid[]) and failed_delivery
    order by id for no key update`.execute(tx);
  await sql`update events e set failed_delivery = false
    where e.id = any(${eventIds}::uuid[]) and e.failed_delivery
      and not exists (select from deliveries d where d.event_id = e.id and d.status = 'failed'
        and d.superseded_by is null and ${isWebhookUrl('d.url')})`.execute(tx);
}

/**
 * Marks the deliveries `oldIds` as replaced by `newIds`, pairwise (see {@link supersedePairs}):
 * the failures that a bulk redelivery or a recovery sends again.
 *
 * @example
 * ```ts
 * await supersedeDeliveries(tx, failed.map((f) => f.id), newIds);
 * ```
 */
export function supersedeDeliveries(
  tx: Transaction<Schema> | Kysely<Schema>,
  oldIds: readonly string[],
  newIds: readonly string[],
): Promise<void> {
  return supersedePairs(tx, oldIds, 'uuid', newIds, sql`d.id = m.key`);
}
