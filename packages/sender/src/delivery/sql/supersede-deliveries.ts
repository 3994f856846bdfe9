import { type Kysely, type RawBuilder, sql, type Transaction } from 'kysely';
import type { Schema } from '../../db/schema.js';

/**
 * Marks deliveries as replaced, pairwise: the delivery that `match` finds for each of `keys` (of
 * SQL type `keyType`, `m.key` in `match`) by the one of `newIds` at its place. The pairs are
 * arrays unnested, which the planner counts, rather than a JSON recordset it guesses at 100 rows:
 * a guess that made it scan the deliveries rather than look each up.
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
  await sql`
            update deliveries d set superseded_by = m.new_id
            from unnest(${keys}::${sql.raw(keyType)}[], ${newIds}::uuid[]) as m(key, new_id)
            where ${match}`.execute(tx);
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
