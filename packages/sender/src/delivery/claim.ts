import { type Kysely, sql, type Transaction } from 'kysely';
import { PREPARE } from '../db/database.js';
import type { Schema } from '../db/schema.js';

/** A claimed delivery, with what its attempt sends. */
export interface Claim {
  id: string;
  /** Proves the claim: only its holder may record the attempt. */
  token: string;
  event_id: string;
  url: string;
  /** Attempts made before this one. */
  attempts: number;
  first_attempt_at: Date | null;
  /** The event's signed bytes. */
  payload: string;
}

/** What {@link claimDeliveries} takes. */
export interface ClaimOptions {
  /** The claim's clock: rows due at or before it are taken. */
  now: Date;
  leaseMs: number;
  limit: number;
  /** URLs to leave alone (at their concurrency limit). */
  skipUrls?: readonly string[];
  /** Deliveries to leave alone (this worker holds them already). */
  skipIds?: readonly string[];
}

/**
 * Claims up to `limit` due deliveries in one statement: `FOR UPDATE SKIP LOCKED` over the due
 * index, and the due time moved to the end of the lease, so a claimed row is not due again until
 * the lease ends (DESIGN.md; docs/decisions.md, "A claim moves the delivery's due time").
 *
 * @example
 * ```ts
 * const claims = await claimDeliveries(db, { now: new Date(), leaseMs: 60_000, limit: 32 });
 * ```
 */
export async function claimDeliveries(
  db: Kysely<Schema> | Transaction<Schema>,
  options: ClaimOptions,
): Promise<Claim[]> {
  const { now, leaseMs, limit, skipUrls = [], skipIds = [] } = options;
  const leaseEnd = new Date(now.getTime() + leaseMs);
  // A named prepared statement on PostgreSQL: planned once per connection, not at every claim.
  const result = await sql<Claim>`${sql.raw(PREPARE)}
    with due as (
      select id from deliveries
      where status = 'pending' and next_attempt_at <= ${now}
        ${skipUrls.length > 0 ? sql`and url <> all(${skipUrls}::text[])` : sql``}
        ${skipIds.length > 0 ? sql`and id <> all(${skipIds}::uuid[])` : sql``}
      order by next_attempt_at
      limit ${limit}
      for update skip locked
    )
    update deliveries d
    set claim_token = gen_random_uuid(), next_attempt_at = ${leaseEnd}
    from due, events e
    where d.id = due.id and e.id = d.event_id
    returning d.id, d.claim_token as token, d.event_id, d.url, d.attempts, d.first_attempt_at, e.payload`.execute(
    db,
  );
  return result.rows;
}
