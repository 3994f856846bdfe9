import { type Kysely, sql, type Transaction } from 'kysely';
import { PREPARE } from '../../db/database.js';
import type { Schema } from '../../db/schema.js';
import type { Claim } from './claim-deliveries.js';

/** What a claim is found by: its row and the token that proves this worker still holds it. */
type Held = Pick<Claim, 'id' | 'token'>;

/**
 * The statement that sets the due time of the deliveries these claims still hold, to `due`: found
 * by their keys (the primary key's index), changed only where the claim's token still matches,
 * and unclaimed too when `release`. One statement for renewals and releases, so both are one
 * prepared plan.
 */
const setDue =
  (release: boolean) =>
  (db: Kysely<Schema> | Transaction<Schema>, claims: readonly Held[], due: Date): Promise<unknown> =>
    sql`${sql.raw(PREPARE)}
        update deliveries
        set next_attempt_at = ${due}, claim_token = case when ${release} then null else claim_token end
        where id = any(${claims.map((c) => c.id)}::uuid[])
          and claim_token = any(${claims.map((c) => c.token)}::uuid[]) and status = 'pending'`.execute(db);

/**
 * Extends the leases of claims still held to the lease end given, so that no other instance takes
 * over a delivery that is still being attempted.
 *
 * @example
 * ```ts
 * await database.delivery((db) => renewLeases(db, claims, new Date(Date.now() + leaseMs)));
 * ```
 */
export const renewLeases = setDue(false);

/**
 * Gives claims back (a URL over its limit, or a shutdown): due again at the time given (now, or
 * later), unclaimed.
 *
 * @example
 * ```ts
 * await database.delivery((db) => releaseClaims(db, unstarted, new Date()));
 * ```
 */
export const releaseClaims = setDue(true);
