import { type Kysely, sql } from 'kysely';
import type { BusinessScope, Schema } from '../../db/schema.js';

/** One finished delivery a listener reports, as its row and its one attempt are written. */
export interface ListenerDeliveryRow {
  id: string;
  event_id: string;
  url: string | null;
  started_at: Date;
  finished_at: Date;
  latency_ms: number;
  status_code: number | null;
  status: 'delivered' | 'failed';
  response_body: string | null;
  error_code: string | null;
  error_message: string | null;
}

/**
 * Inserts deliveries already finished, each with its one attempt, to the `cli:` destination
 * `destination`, in one statement: the reports of `payhook listen` (`listen/record.ts`). No worker
 * claims them (they are never pending). Only events of `owner` are recorded, and an id already
 * recorded is skipped. Returns the ids it wrote.
 *
 * @example
 * ```ts
 * const ids = await insertListenerDeliveries(db, { businessId, mode }, 'cli:lst_1', rows);
 * ```
 */
export async function insertListenerDeliveries(
  db: Kysely<Schema>,
  owner: BusinessScope,
  destination: string,
  rows: readonly ListenerDeliveryRow[],
): Promise<string[]> {
  if (rows.length === 0) return [];
  const result = await sql<{ id: string }>`
    with v as (
      select * from json_to_recordset(${JSON.stringify(rows)}::json) as v(
        id uuid, event_id uuid, url text, started_at timestamptz, finished_at timestamptz,
        latency_ms integer, status_code integer, status text, response_body text, error_code text,
        error_message text)
    ),
    d as (
      insert into deliveries (id, event_id, url, status, attempts, next_attempt_at, first_attempt_at,
                              last_attempt_at, finished_at, last_status_code, last_error)
      select v.id, v.event_id, ${destination}, v.status, 1, v.started_at, v.started_at,
             v.started_at, v.finished_at, v.status_code, coalesce(v.error_message, v.error_code)
      from v
      join events e on e.id = v.event_id and e.business_id = ${owner.businessId} and e.mode = ${owner.mode}
      on conflict (id) do nothing
      returning id
    )
    insert into delivery_attempts
      (delivery_id, attempt, url, started_at, latency_ms, status_code, response_body, error_code, error_message)
    select v.id, 1, v.url, v.started_at, v.latency_ms, v.status_code, v.response_body, v.error_code, v.error_message
    from v join d on d.id = v.id
    returning delivery_id as id`.execute(db);
  return result.rows.map((r) => r.id);
}
