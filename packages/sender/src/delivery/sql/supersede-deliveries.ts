import { type Kysely, sql, type Transaction } from 'kysely';
import type { Schema } from '../../db/schema.js';

/**
 * Marks the deliveries `oldIds` as replaced by `newIds`, pairwise: the failures that a bulk
 * redelivery or a recovery sends again. The pairs are arrays unnested, which the planner counts,
 * rather than a JSON recordset it guesses at 100 rows: a guess that made it scan the deliveries
 * rather than look each up.
 *
 * @example
 * ```ts
 * await supersedeDeliveries(tx, failed.map((f) => f.id), newIds);
 * ```
 */
export async function supersedeDeliveries(
  tx: Transaction<Schema> | Kysely<Schema>,
  oldIds: readonly string[],
  newIds: readonly string[],
): Promise<void> {
  await sql`
            update deliveries d set superseded_by = m.new_id
            from unnest(${oldIds}::uuid[], ${newIds}::uuid[]) as m(old_id, new_id)
            where d.id = m.old_id`.execute(tx);
}
