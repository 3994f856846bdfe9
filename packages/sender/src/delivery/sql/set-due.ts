import { type Kysely, sql, type Transaction } from 'kysely';
import { PREPARE } from '../../db/database.js';
import type { Schema } from '../../db/schema.js';
import type { Claim } from './claim-deliveries.js';

/** What a claim is found by: its row and the token that proves this worker still holds it. */
type Held = Pick<Claim, 'id' | 'token'>;

/**
 * Sets the due time of the deliveries these claims still hold: found by their keys (the primary
 * key's index), changed only where the claim's token still matches. One statement for renewals
 * and releases, so both are one prepared plan.
 */
function setDue(
  db: Kysely<Schema> | Transaction<Schema>,
  claims: readonly Held[],
  due: Date,
  release: boolean,
): Promise<unknown> {
  return sql`${sql.raw(PREPARE)}
        update deliveries
        set next_attempt_at = ${due}, claim_token = case when ${release} then null else claim_token end
        where id = any(${claims.map((c) => c.id)}::uuid[])
          and claim_token = any(${claims.map((c) => c.token)}::uuid[]) and status = 'pending'`.execute(db);
}

/**
 * Extends the leases of claims still held to `leaseEnd`, so that no other instance takes over a
 * delivery that is still being attempted.
 *
 * @example
 * ```ts
 * await database.delivery((db) => renewLeases(db, claims, new Date(Date.now() + leaseMs)));
 * ```
 */
export function renewLeases(
  db: Kysely<Schema> | Transaction<Schema>,
  claims: readonly Held[],
  leaseEnd: Date,
): Promise<unknown> {
  return setDue(db, claims, leaseEnd, false);
}

/**
 * Gives claims back (a URL over its limit, or a shutdown): due again at `now`, unclaimed.
 *
 * @example
 * ```ts
 * await database.delivery((db) => releaseClaims(db, unstarted, new Date()));
 * ```
 */
export function releaseClaims(
  db: Kysely<Schema> | Transaction<Schema>,
  claims: readonly Held[],
  now: Date,
): Promise<unknown> {
  return setDue(db, claims, now, true);
}
