import { type RawBuilder, sql, type Transaction } from 'kysely';
import type { Mode, Schema } from '../../db/schema.js';
import { endpointTakesSql } from '../../endpoints/filter.js';
import { isWebhookUrl } from '../destination.js';
import type { TypeScope } from '../recover-gaps.js';
import { enqueueDeliveries } from './insert-deliveries.js';
import { supersedeDeliveries } from './supersede-deliveries.js';
import { WAKE } from './wake-channel.js';

// The statements of a recovery (`../recover.ts`), one batch each, in the recovery's transaction
// for that batch: the held deliveries made due, the failures replaced, and the events of a gap
// given the deliveries they never got. Each reads through an index, at most `size` rows.

/** The endpoint a recovery is for: its business, URL, filter and age. */
export interface RecoveredEndpoint {
  id: string;
  business_id: string;
  mode: Mode;
  url: string;
  created_at: Date;
  enabled_events: string[];
}

/** What a recovery queued (one batch's, or the whole recovery's). */
export interface Recovery {
  /** Deliveries queued: new ones in place of failures and of events never sent, and held ones made due. */
  queued: number;
  /** New deliveries, each with its own 48 hours (in place of a failure, or of an event never sent). */
  created: number;
  /** Deliveries never attempted, made due now. */
  resumed: number;
}

/** Where a batch stopped reading: its last row, in the order it reads. */
export interface Cursor {
  /** A creation time as PostgreSQL writes it, to the microsecond (which a `Date` is not). */
  at: string | null;
  id: string;
}

/** What one batch read and did. */
export interface Batch {
  read: number;
  last: Cursor | null;
  done: Recovery;
}

/** The window of a recovery, and its clock. */
export interface RecoverWindow {
  since: Date;
  until: Date;
  now: Date;
}

/**
 * One kind of a recovery's work, read a batch at a time: in `tx`, at most `size` rows from
 * `cursor` on (from its start when null), and what they called for done.
 */
export type ReadBatch = (tx: Transaction<Schema>, cursor: Cursor | null, size: number) => Promise<Batch>;

/** What one batch found to do, per event. */
interface Action {
  event_id: string;
  /** No delivery to the endpoint: one is made. */
  never_sent: boolean;
  /** Its failures not replaced yet (none delivered, none pending): one delivery in their place. */
  failed_ids: string[] | null;
}

const NOTHING: Recovery = { queued: 0, created: 0, resumed: 0 };

/** The endpoint's deliveries, and those older than endpoints made to its URL. */
const ofEndpoint = (alias: string, endpointId: string) =>
  sql`(${sql.ref(`${alias}.endpoint_id`)} = ${endpointId}::uuid or (${sql.ref(`${alias}.endpoint_id`)} is null
    and ${sql.ref(`${alias}.url`)} = (select url from webhook_endpoints where id = ${endpointId}::uuid)
    and ${isWebhookUrl(`${alias}.url`)}))`;

/** The event `alias` is in the window, and of a type the endpoint takes. */
const inWindow = (alias: string, window: RecoverWindow) =>
  sql`${sql.ref(`${alias}.created_at`)} >= ${window.since} and ${sql.ref(`${alias}.created_at`)} < ${window.until}
    and ${endpointTakesSql('ep', sql.ref(`${alias}.type`))}`;

/**
 * The endpoint's deliveries never attempted (held while it was disabled, or not sent yet) whose
 * event is in the window, made due now at the latest; read by the endpoint's index of pending
 * deliveries, in id order. An event with an attempt under way or a delivery made is left alone.
 */
export function resumeHeld(endpoint: RecoveredEndpoint, window: RecoverWindow): ReadBatch {
  return async (tx, cursor, size) => {
    const { rows } = await sql<{ read: number; last_id: string | null; resumed: number }>`
    with held as (
      select d.id from deliveries d
      where d.endpoint_id = ${endpoint.id}::uuid and d.status = 'pending'
        ${cursor ? sql`and d.id > ${cursor.id}::uuid` : sql``}
      order by d.id limit ${size}
    ),
    due as (
      update deliveries d set next_attempt_at = least(d.next_attempt_at, ${window.now})
      from held h, events e, webhook_endpoints ep
      where d.id = h.id and e.id = d.event_id and ep.id = ${endpoint.id}::uuid
        and d.attempts = 0 and d.claim_token is null
        and ${inWindow('e', window)}
        and not exists (select 1 from deliveries o where o.event_id = d.event_id and o.id <> d.id
          and ${ofEndpoint('o', endpoint.id)} and (o.status = 'delivered' or (o.status = 'pending' and o.attempts > 0)))
      returning d.id
    )
    select (select count(*) from held)::int as read,
           (select (array_agg(id order by id desc))[1]::text from held) as last_id,
           (select count(*) from due)::int as resumed`.execute(tx);
    const { read, last_id, resumed } = rows[0] ?? { read: 0, last_id: null, resumed: 0 };
    if (resumed > 0) await sql`select ${WAKE}`.execute(tx);
    return {
      read,
      last: last_id ? { at: null, id: last_id } : null,
      done: { queued: resumed, created: 0, resumed },
    };
  };
}

/**
 * The endpoint's failures not replaced yet whose event is in the window and has no delivery to
 * it made or under way, each replaced by a new delivery; read by the endpoint's index of
 * failures, oldest first.
 */
export function replaceFailed(endpoint: RecoveredEndpoint, window: RecoverWindow): ReadBatch {
  return async (tx, cursor, size) => {
    const after = cursor
      ? sql`and (d.created_at, d.id) > (${cursor.at}::timestamptz, ${cursor.id}::uuid)`
      : sql``;
    const { rows } = await sql<Action & { read: number; last_at: string; last_id: string }>`
    with failed as (
      select d.id, d.event_id, d.created_at from deliveries d
      where d.endpoint_id = ${endpoint.id}::uuid and d.status = 'failed' and d.superseded_by is null
        and d.created_at >= ${window.since} ${after}
      order by d.created_at, d.id limit ${size}
    ),
    edge as (
      select count(*)::int as read, (array_agg(created_at::text order by created_at desc, id desc))[1] as last_at,
             (array_agg(id::text order by created_at desc, id desc))[1] as last_id
      from failed
    ),
    actions as (
      select f.event_id, false as never_sent, array_agg(f.id) as failed_ids
      from failed f
      join events e on e.id = f.event_id
      join webhook_endpoints ep on ep.id = ${endpoint.id}::uuid
      where ${inWindow('e', window)}
        and not exists (select 1 from deliveries o where o.event_id = f.event_id
          and ${ofEndpoint('o', endpoint.id)} and o.status in ('delivered', 'pending'))
      group by f.event_id
    )
    select edge.read, edge.last_at, edge.last_id, a.*
    from edge left join actions a on true`.execute(tx);
    return applied(tx, endpoint, rows);
  };
}

/**
 * The events of one gap (`../recover-gaps.ts`) read in creation order through the events' page
 * index, those of the types in `scope` that the endpoint takes: each with no delivery to it gets
 * one (if the endpoint existed when it was made), and each whose deliveries to it all failed
 * (none replaced, older than endpoints included) gets one in their place.
 */
export function sendMissed(endpoint: RecoveredEndpoint, gap: RecoverWindow, scope: TypeScope): ReadBatch {
  return async (tx, cursor, size) => {
    const after = cursor
      ? sql`(e.created_at, e.id) > (${cursor.at}::timestamptz, ${cursor.id}::uuid)`
      : sql`e.created_at >= ${gap.since}`;
    const { rows } = await sql<Action & { read: number; last_at: string; last_id: string }>`
    with batch as (
      select e.id, e.created_at, e.type from events e
      where e.business_id = ${endpoint.business_id} and e.mode = ${endpoint.mode}
        and ${after} and e.created_at < ${gap.until}
      order by e.created_at, e.id
      limit ${size}
    ),
    edge as (
      select count(*)::int as read, (array_agg(created_at::text order by created_at desc, id desc))[1] as last_at,
             (array_agg(id::text order by created_at desc, id desc))[1] as last_id
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
               coalesce(bool_or(d.status in ('delivered', 'pending')), false) as covered,
               array_agg(d.id) filter (where d.status = 'failed' and d.superseded_by is null) as failed_ids
        from deliveries d
        where d.event_id = b.id and ${ofEndpoint('d', endpoint.id)}
      ) found
      where ${endpointTakesSql('ep', sql.ref('b.type'))} and ${scopeSql(scope, sql.ref('b.type'))}
    ),
    actions as (
      select event_id, none and created_at >= ${endpoint.created_at} as never_sent, failed_ids
      from per_event
      where (none and created_at >= ${endpoint.created_at}) or (not covered and failed_ids is not null)
    )
    select edge.read, edge.last_at, edge.last_id, a.*
    from edge left join actions a on true`.execute(tx);
    return applied(tx, endpoint, rows);
  };
}

/** SQL: the type `type` is in `scope`. */
function scopeSql(scope: TypeScope, type: RawBuilder<unknown>) {
  if (scope.kind === 'all') return sql`true`;
  const listed = sql`${type} = any(${scope.types}::text[])`;
  return scope.kind === 'only' ? listed : sql`not (${listed})`;
}

/** A batch's rows applied: its edge, and what it did. */
async function applied(
  tx: Transaction<Schema>,
  endpoint: RecoveredEndpoint,
  rows: readonly (Action & { read: number; last_at: string; last_id: string })[],
): Promise<Batch> {
  const edge = rows[0];
  if (!edge || edge.read === 0) return { read: 0, last: null, done: NOTHING };
  const done = await applyActions(
    tx,
    endpoint,
    rows.filter((r) => r.event_id !== null),
  );
  return { read: edge.read, last: { at: edge.last_at, id: edge.last_id }, done };
}

/** Queues what a batch found: the held deliveries made due, the new ones made and marked. */
async function applyActions(
  tx: Transaction<Schema>,
  endpoint: RecoveredEndpoint,
  actions: readonly Action[],
): Promise<Recovery> {
  const neverSent = actions.filter((a) => a.never_sent).map((a) => a.event_id);
  const failed = actions.flatMap((a) => a.failed_ids ?? []);
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
    await supersedeDeliveries(
      tx,
      kept.map((r) => r.id),
      kept.map((r) => newIdOf.get(r.event_id) as string),
    );
  }
  return { queued: ids.length, created: ids.length, resumed: 0 };
}
