import { type Kysely, sql, type Transaction } from 'kysely';
import type { Schema } from '../../db/schema.js';

/**
 * The part of the attempt-record statement (`record-attempts.ts`) that keeps each endpoint's run
 * of failures in `endpoint_failures` (migration 0013): CTEs over its `outcomes` (the attempts to
 * endpoints whose claim the statement keeps). An endpoint with a delivered
 * attempt in the batch has its row deleted (a probe of the primary key, nothing written when it
 * was not failing); an endpoint whose attempts all failed gets its row made, or its count raised,
 * its start kept at the earliest failure. A healthy endpoint's batch costs one index probe; the
 * row exists only while the endpoint is failing. The evaluation that warns and disables is
 * `endpoints/health.ts`.
 */
export const endpointFailureCtes = sql`,
      per_endpoint as (
        select endpoint_id, bool_or(ok) as any_ok, min(started_at) as since, max(started_at) as last,
               count(*)::int as n
        from outcomes group by endpoint_id
      ),
      recovered as (
        delete from endpoint_failures f using per_endpoint p
        where f.endpoint_id = p.endpoint_id and p.any_ok
      ),
      failing as (
        insert into endpoint_failures (endpoint_id, failing_since, last_failure_at, attempts)
        select endpoint_id, since, last, n from per_endpoint where not any_ok
        on conflict (endpoint_id) do update
        set failing_since = least(endpoint_failures.failing_since, excluded.failing_since),
            last_failure_at = greatest(endpoint_failures.last_failure_at, excluded.last_failure_at),
            attempts = endpoint_failures.attempts + excluded.attempts
      )`;

/** An endpoint's run of failures, as `endpoint_failures` keeps it. */
export interface FailureRow {
  endpoint_id: string;
  /** The first failed attempt since the last delivered one. */
  failing_since: Date;
  last_failure_at: Date;
  /** Failed attempts since `failing_since`. */
  attempts: number;
  /** The highest warning logged for this run (0, 50, 75 or 90). */
  warned: number;
}

/**
 * The runs of failures of `endpointIds` (only those failing have one).
 *
 * @example
 * ```ts
 * const rows = await failuresOf(db, [endpoint.id]);
 * ```
 */
export async function failuresOf(
  db: Kysely<Schema> | Transaction<Schema>,
  endpointIds: readonly string[],
): Promise<FailureRow[]> {
  if (endpointIds.length === 0) return [];
  const { rows } = await sql<FailureRow>`select endpoint_id, failing_since, last_failure_at, attempts, warned
    from endpoint_failures where endpoint_id = any(${endpointIds}::uuid[])`.execute(db);
  return rows;
}

/**
 * Forgets an endpoint's run of failures: when it is enabled again, it has the whole period
 * before it is disabled once more.
 *
 * @example
 * ```ts
 * await forgetFailures(tx, endpoint.id);
 * ```
 */
export async function forgetFailures(db: Kysely<Schema> | Transaction<Schema>, endpointId: string) {
  await sql`delete from endpoint_failures where endpoint_id = ${endpointId}::uuid`.execute(db);
}
