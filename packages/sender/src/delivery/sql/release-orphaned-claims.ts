import { type Kysely, sql, type Transaction } from 'kysely';
import { PREPARE } from '../../db/database.js';
import type { Schema } from '../../db/schema.js';

/**
 * Gives back, due at `now`, the claims whose token begins with `owner` (the claiming worker's) and
 * is not among `held`: claims of this worker that it never heard back of. A claim cut short by a
 * lost or frozen connection may still commit on the server once it answers again; the worker,
 * having seen it fail, holds none of its rows, which would wait for their lease to end. Run when
 * the database is back from an outage and after any failed statement of the worker (a few times,
 * `orphan-sweeps.ts`). It reads the pending rows through the due index (no index has the token):
 * its cost follows the queue, never the history (with 1,000,000 delivered rows and 2,000 pending,
 * 25 buffers and 0.5 ms).
 *
 * @example
 * ```ts
 * await database.delivery((db) => releaseOrphanedClaims(db, { owner, held: tokens, now: new Date() }));
 * ```
 */
export async function releaseOrphanedClaims(
  db: Kysely<Schema> | Transaction<Schema>,
  { owner, held, now }: { owner: string; held: readonly string[]; now: Date },
): Promise<number> {
  const result = await sql`${sql.raw(PREPARE)}
    update deliveries set claim_token = null, next_attempt_at = ${now}
    where status = 'pending' and claim_token is not null and left(claim_token::text, 8) = ${owner}
      and claim_token <> all(${held}::uuid[])`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}
