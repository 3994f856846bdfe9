import { type Kysely, sql, type Transaction } from 'kysely';
import { WORKER_PLANNER } from '../../db/database.js';
import type { Schema } from '../../db/schema.js';

/**
 * Where a retention pass stands in the events, oldest first: the `created_at` of the last one it
 * looked at, as PostgreSQL's text, to the microsecond (a `Date` keeps milliseconds), and the events
 * of that very time it left in place (held by another transaction). The next batch starts there,
 * without those: events written together in one statement can share a time.
 */
export interface HistoryCursor {
  at: string;
  kept: string[];
}

/** What {@link removeEventBatch} did. */
export interface EventBatch {
  /** Another instance holds the retention's lock: its pass does the work. */
  busy: boolean;
  /** Events looked at, removed or not; below the batch's size when none are left. */
  seen: number;
  /** Where the next batch starts (unset when none was looked at). */
  cursor?: HistoryCursor;
  events: number;
  deliveries: number;
  attempts: number;
}

/**
 * Set at the start of a batch's transaction, for it alone, in one statement (PGlite takes no more
 * in one): the worker's planner settings, index walks only (a plan that read all the deliveries
 * for each batch was the planner's choice on a table it misjudged), and a commit that does not
 * wait for the disk (a batch lost in a crash is the next pass's again).
 */
const BATCH_SETTINGS = sql.raw(
  `select ${Object.entries({ ...WORKER_PLANNER, synchronous_commit: 'off' })
    .map(([name, value]) => `set_config('${name}', '${value}', true)`)
    .join(', ')}`,
);

/**
 * One batch of a retention pass, in the caller's transaction: up to `limit` events created before
 * `horizon` (after `cursor`, oldest first, through the index on `created_at`) whose deliveries are
 * all finished, and finished before the horizon, are deleted with those deliveries and their
 * attempts. Every row is taken `FOR UPDATE SKIP LOCKED`: an event another transaction holds (a
 * redelivery writing a delivery of it holds its key) and an event one of whose deliveries another
 * transaction holds (a worker, a bulk redelivery, a recovery) are left in place, never waited for.
 * Each instance's batches take turns on a transaction-level advisory lock of the schema: when
 * another holds it, nothing is done (`busy`).
 *
 * @example
 * ```ts
 * const batch = await db.transaction().execute((tx) =>
 *   removeEventBatch(tx, { horizon: new Date(Date.now() - 30 * 86_400_000), limit: 1000 }),
 * );
 * ```
 */
export async function removeEventBatch(
  tx: Transaction<Schema>,
  { horizon, cursor, limit }: { horizon: Date; cursor?: HistoryCursor | undefined; limit: number },
): Promise<EventBatch> {
  const batch: EventBatch = { busy: false, seen: 0, events: 0, deliveries: 0, attempts: 0 };
  const { rows: lock } = await sql<{ locked: boolean }>`
    select pg_try_advisory_xact_lock(hashtext('payhook-retention:' || current_schema())) as locked`.execute(
    tx,
  );
  if (lock[0]?.locked !== true) return { ...batch, busy: true };
  await BATCH_SETTINGS.execute(tx);
  const after = cursor
    ? sql`and e.created_at >= ${cursor.at}::timestamptz and e.id <> all(${cursor.kept}::uuid[])`
    : sql``;
  // In the index's order, no sort: the walk stops at the limit.
  const { rows: events } = await sql<{ id: string; at: string }>`
    select e.id, e.created_at::text as at from events e
    where e.created_at < ${horizon} ${after}
      and not exists (select 1 from deliveries d where d.event_id = e.id
        and (d.status = 'pending' or d.created_at >= ${horizon} or d.finished_at >= ${horizon}))
    order by e.created_at
    limit ${limit}
    for update of e skip locked`.execute(tx);
  const last = events.at(-1);
  if (!last) return batch;
  batch.seen = events.length;
  const ids = events.map((e) => e.id);
  // Their deliveries, locked where no one else holds them, and checked again: no delivery can be
  // added to an event this transaction holds, but one may have been added before the lock.
  const { rows: held } = await sql<{ event_id: string; n: number; ids: string[] | null }>`
    with locked as (
      select id, event_id from deliveries
      where event_id = any(${ids}::uuid[]) and status <> 'pending' and created_at < ${horizon}
        and (finished_at is null or finished_at < ${horizon})
      for update skip locked
    ),
    counts as (
      select event_id, count(*)::int as n from deliveries where event_id = any(${ids}::uuid[])
      group by event_id
    )
    select c.event_id, c.n, l.ids
    from counts c
    left join (select event_id, array_agg(id) as ids from locked group by event_id) l using (event_id)`.execute(
    tx,
  );
  const skipped = new Set<string>();
  const deliveries: string[] = [];
  for (const row of held) {
    if ((row.ids?.length ?? 0) === row.n) deliveries.push(...(row.ids ?? []));
    else skipped.add(row.event_id);
  }
  const keptNow = events.filter((e) => e.at === last.at && skipped.has(e.id)).map((e) => e.id);
  batch.cursor = { at: last.at, kept: cursor?.at === last.at ? [...cursor.kept, ...keptNow] : keptNow };
  const removable = ids.filter((id) => !skipped.has(id));
  if (removable.length === 0) return batch;
  // One statement: the deliveries' foreign key is checked at its end, when both are gone.
  const { rows } = await sql<{ events: number; deliveries: number; attempts: number }>`
    with a as (delete from delivery_attempts where delivery_id = any(${deliveries}::uuid[]) returning 1),
    d as (delete from deliveries where id = any(${deliveries}::uuid[]) returning 1),
    e as (delete from events where id = any(${removable}::uuid[]) returning 1)
    select (select count(*) from e)::int as events, (select count(*) from d)::int as deliveries,
           (select count(*) from a)::int as attempts`.execute(tx);
  return { ...batch, ...(rows[0] as { events: number; deliveries: number; attempts: number }) };
}

/** The tables whose rows expire by a time of their own, and that time's column. */
export const EXPIRING = {
  endpoint_attempt_hours: 'hour',
  idempotency_keys: 'created_at',
  dashboard_sessions: 'expires_at',
} as const;

/**
 * Deletes up to `limit` rows of `table` whose time (see {@link EXPIRING}) is before `cut`, in one
 * statement, skipping rows another transaction holds (a request taking an expired idempotency key
 * over). Resolves with how many it deleted.
 *
 * @example
 * ```ts
 * const n = await removeExpired(db, 'idempotency_keys', new Date(Date.now() - 48 * 3_600_000), 1000);
 * ```
 */
export async function removeExpired(
  db: Kysely<Schema>,
  table: keyof typeof EXPIRING,
  cut: Date,
  limit: number,
): Promise<number> {
  const column = sql.ref(EXPIRING[table]);
  const { rows } = await sql<{ n: number }>`
    with gone as (
      delete from ${sql.table(table)}
      where ctid = any(array(select ctid from ${sql.table(table)} where ${column} < ${cut}
                             limit ${limit} for update skip locked))
        and ${column} < ${cut}
      returning 1
    )
    select count(*)::int as n from gone`.execute(db);
  return rows[0]?.n ?? 0;
}
