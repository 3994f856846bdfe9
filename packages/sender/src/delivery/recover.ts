import { type Kysely, sql, type Transaction } from 'kysely';
import type { Mode, Schema } from '../db/schema.js';
import { endpointTakesSql } from '../endpoints/filter.js';
import { enqueueDeliveries, WAKE } from './delivery-state.js';
import { isWebhookUrl } from './destination.js';

/** How far back a recovery may reach: events created at most this many days ago. */
export const RECOVER_MAX_DAYS = 14;

/** The endpoint a recovery is for: its business, URL, filter and age. */
export interface RecoveredEndpoint {
  id: string;
  business_id: string;
  mode: Mode;
  url: string;
  created_at: Date;
}

/** What {@link recoverEndpoint} queued. */
export interface Recovery {
  /** Deliveries queued: new ones in place of failures and of events never sent, and held ones made due. */
  queued: number;
  /** New deliveries, each with its own 48 hours (in place of a failure, or of an event never sent). */
  created: number;
  /** Deliveries never attempted, made due now. */
  resumed: number;
}

/** Events a recovery reads per statement (and per transaction). */
export const RECOVER_BATCH = 2000;

/** What one batch of a recovery found to do, per event (at most one kind each). */
interface Action {
  event_id: string;
  /** No delivery to the endpoint: one is made. */
  never_sent: boolean;
  /** Its failures not replaced yet (none delivered, none pending): one delivery in their place. */
  failed_ids: string[] | null;
  /** Its pending deliveries, all never attempted (held while the endpoint was disabled): made due. */
  unattempted_ids: string[] | null;
}

/** Where a recovery has read up to: the last event of the last batch, in creation order. */
interface Cursor {
  /** Its creation time as PostgreSQL writes it: to the microsecond, which a `Date` is not. */
  created_at: string;
  id: string;
}

/**
 * Recovers a window of an endpoint's events: every event of its business and mode created in
 * `[since, until)` that the endpoint's filter takes is sent to it again when it was never
 * delivered there, each as a delivery with its own 48 hours:
 * - a failed delivery (not redelivered yet) gets a new delivery in its place, marked as replaced
 *   (`superseded_by`), as a redelivery does;
 * - a pending delivery never attempted (one held while the endpoint was disabled) is made due now;
 * - an event that has no delivery to the endpoint (made while it was disabled, or while its
 *   filter left the type out) gets one, if the endpoint existed when the event was made.
 * An event delivered to the endpoint, or still being tried there, is left alone: a recovery never
 * sends a delivered event again. Deliveries older than endpoints (no endpoint, the same URL)
 * count as the endpoint's.
 *
 * The window is read in batches of {@link RECOVER_BATCH} events, oldest first, through the
 * events' page index; each batch is one statement that finds, in SQL, only the events with
 * something to do, and the batch's changes commit in its own transaction, which holds the
 * endpoint's row: two recoveries of one endpoint take turns batch by batch, and each sees what
 * the other queued. A recovery cut short (a restart) has queued what its batches committed, and
 * running it again queues the rest: what it queued is pending, and left alone. `onProgress` is
 * called after each batch but the last. A disabled endpoint's recovered deliveries are held with its others
 * until it is enabled.
 *
 * @example
 * ```ts
 * const { queued } = await recoverEndpoint(database.db, endpoint, { since, until: new Date(), now: new Date() });
 * ```
 */
export async function recoverEndpoint(
  db: Kysely<Schema>,
  endpoint: RecoveredEndpoint,
  window: { since: Date; until: Date; now: Date },
  options: {
    /** Events read per batch (default {@link RECOVER_BATCH}). */
    batch?: number;
    /** Called after each batch but the last. */
    onProgress?: (progress: { readThrough: Date; events: number } & Recovery) => void;
    /**
     * Run in the last batch's transaction with what the recovery queued in all: what must
     * commit with its last write (the response stored under an Idempotency-Key).
     */
    onDone?: (tx: Transaction<Schema>, recovery: Recovery) => Promise<void>;
  } = {},
): Promise<Recovery> {
  const size = options.batch ?? RECOVER_BATCH;
  const total: Recovery = { queued: 0, created: 0, resumed: 0 };
  let cursor: Cursor | null = null;
  let events = 0;
  for (;;) {
    const batch: Batch = await db.transaction().execute(async (tx) => {
      const read = await recoverBatch(tx, endpoint, window, cursor, size);
      const last = read.last === null || read.read < size;
      if (last) await options.onDone?.(tx, sum(total, read.done));
      return read;
    });
    events += batch.read;
    Object.assign(total, sum(total, batch.done));
    if (batch.last === null || batch.read < size) break;
    cursor = batch.last;
    options.onProgress?.({ readThrough: batch.lastAt as Date, events, ...total });
  }
  return total;
}

const sum = (a: Recovery, b: Recovery): Recovery => ({
  queued: a.queued + b.queued,
  created: a.created + b.created,
  resumed: a.resumed + b.resumed,
});

interface Batch {
  /** Events read. */
  read: number;
  /** The last of them, null when none was. */
  last: Cursor | null;
  lastAt: Date | null;
  done: Recovery;
}

/** One batch of {@link recoverEndpoint}: the events after `cursor`, in the caller's transaction. */
async function recoverBatch(
  tx: Transaction<Schema>,
  endpoint: RecoveredEndpoint,
  window: { since: Date; until: Date; now: Date },
  cursor: Cursor | null,
  size: number,
): Promise<Batch> {
  await sql`select 1 from webhook_endpoints where id = ${endpoint.id}::uuid for update`.execute(tx);
  const after = cursor
    ? sql`(e.created_at, e.id) > (${cursor.created_at}::timestamptz, ${cursor.id}::uuid)`
    : sql`e.created_at >= ${window.since}`;
  const { rows } = await sql<Action & { read: number; last_at: Date; last_at_text: string; last_id: string }>`
    with batch as (
      select e.id, e.created_at, e.type from events e
      where e.business_id = ${endpoint.business_id} and e.mode = ${endpoint.mode}
        and ${after} and e.created_at < ${window.until}
      order by e.created_at, e.id
      limit ${size}
    ),
    edge as (
      select count(*)::int as read, max(created_at) as last_at, max(created_at)::text as last_at_text,
             (array_agg(id order by created_at desc, id desc))[1] as last_id
      from batch
    ),
    per_event as (
      -- Per event, its deliveries to the endpoint, looked up by event (an index probe each):
      -- never a join the planner could turn into a scan of every delivery.
      select b.id as event_id, b.created_at, found.*
      from batch b
      join webhook_endpoints ep on ep.id = ${endpoint.id}::uuid
      cross join lateral (
        select count(d.id) = 0 as none,
               coalesce(bool_or(d.status = 'delivered'), false) as delivered,
               coalesce(bool_or(d.status = 'pending'), false) as pending,
               coalesce(bool_or(d.status = 'pending' and d.attempts > 0), false) as tried,
               array_agg(d.id) filter (where d.status = 'failed' and d.superseded_by is null) as failed_ids,
               array_agg(d.id) filter (where d.status = 'pending') as pending_ids
        from deliveries d
        where d.event_id = b.id
          and (d.endpoint_id = ep.id or (d.endpoint_id is null and d.url = ep.url and ${isWebhookUrl('d.url')}))
      ) found
      where ${endpointTakesSql('ep', sql.ref('b.type'))}
    ),
    actions as (
      select event_id,
             none and created_at >= ${endpoint.created_at} as never_sent,
             case when not pending then failed_ids end as failed_ids,
             case when pending and not tried then pending_ids end as unattempted_ids
      from per_event
      where not delivered and ((none and created_at >= ${endpoint.created_at})
        or (not pending and failed_ids is not null) or (pending and not tried))
    )
    select edge.read, edge.last_at, edge.last_at_text, edge.last_id, a.*
    from edge left join actions a on true`.execute(tx);
  const edge = rows[0];
  if (!edge || edge.read === 0) {
    return { read: 0, last: null, lastAt: null, done: { queued: 0, created: 0, resumed: 0 } };
  }
  const actions = rows.filter((r) => r.event_id !== null);
  const done = await applyActions(tx, endpoint, window.now, actions);
  return {
    read: edge.read,
    last: { created_at: edge.last_at_text, id: edge.last_id },
    lastAt: edge.last_at,
    done,
  };
}

/** Queues what a batch found: the held deliveries made due, the new ones made and marked. */
async function applyActions(
  tx: Transaction<Schema>,
  endpoint: RecoveredEndpoint,
  now: Date,
  actions: readonly Action[],
): Promise<Recovery> {
  const neverSent = actions.filter((a) => a.never_sent).map((a) => a.event_id);
  const failed = actions.flatMap((a) => a.failed_ids ?? []);
  const unattempted = actions.flatMap((a) => a.unattempted_ids ?? []);
  let resumed = 0;
  if (unattempted.length > 0) {
    const { rows: due } = await sql<{ id: string }>`update deliveries set next_attempt_at = ${now}
      where id = any(${unattempted}::uuid[]) and status = 'pending' and attempts = 0 and claim_token is null
      returning id`.execute(tx);
    resumed = due.length;
  }
  // The failures still not replaced, locked: a bulk redelivery running now skips them.
  const replaced =
    failed.length === 0
      ? []
      : (
          await sql<{ id: string; event_id: string }>`select id, event_id from deliveries
            where id = any(${failed}::uuid[]) and status = 'failed' and superseded_by is null
            order by id for update`.execute(tx)
        ).rows;
  // The events it sends, held against retention's removal until this transaction ends (one
  // removed meanwhile is left out: it is past retention).
  const wanted = [...new Set([...replaced.map((r) => r.event_id), ...neverSent])];
  const made =
    wanted.length === 0
      ? []
      : (
          await sql<{ id: string }>`select id from events where id = any(${wanted}::uuid[])
            order by id for key share`.execute(tx)
        ).rows.map((r) => r.id);
  const ids = await enqueueDeliveries(
    tx,
    made.map((eventId) => ({ eventId, url: endpoint.url, endpointId: endpoint.id })),
  );
  const newIdOf = new Map(made.map((eventId, i) => [eventId, ids[i] as string]));
  if (replaced.length > 0) {
    const kept = replaced.filter((r) => newIdOf.has(r.event_id));
    const pairs = JSON.stringify(kept.map((r) => ({ id: r.id, by: newIdOf.get(r.event_id) })));
    await sql`update deliveries d set superseded_by = p.by
      from json_to_recordset(${pairs}::json) as p(id uuid, by uuid)
      where d.id = p.id and d.id = any(${kept.map((r) => r.id)}::uuid[])`.execute(tx);
  }
  if (resumed > 0 && ids.length === 0) await sql`select ${WAKE}`.execute(tx);
  return { queued: ids.length + resumed, created: ids.length, resumed };
}
