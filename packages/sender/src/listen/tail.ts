import { type Kysely, type SqlBool, sql } from 'kysely';
import { microsColumn, type Position, positionCondition } from '../db/keyset.js';
import type { Mode, Schema } from '../db/schema.js';

/** An event as a listener gets it: the exact bytes every delivery sends, and where it stands. */
export interface TailedEvent {
  id: string;
  type: string;
  payload: string;
  /** Its creation time in microseconds since the epoch, as text: the stream's position. */
  micros: string;
}

/** Which events a tail reads. */
export interface TailOptions {
  businessId: string;
  mode: Mode;
  /** Only these types (default: every type). */
  types?: readonly string[];
  /** Start after this position (an event's time and id); default: from now on. */
  after?: Position;
  /**
   * Look behind the position for events that committed after later ones (PostgreSQL, where
   * transactions run side by side; PGlite runs one at a time, so its commits keep their order).
   */
  lookBehind: boolean;
}

/**
 * How far behind its position a tail looks again for events it has not returned: an event is
 * stamped when its statement runs and becomes visible when its transaction commits, so one
 * stamped a little earlier than another can appear after it. One second is far longer than any
 * of the sender's event-writing transactions.
 */
export const TAIL_LOOKBACK_MICROS = 1_000_000n;

/** How often a tail looks behind its position (ms). */
const LOOK_BEHIND_EVERY_MS = 500;

const ZERO_UUID = '00000000-0000-0000-0000-000000000000';

/**
 * Reads a business's new events in the order they were made, from a position on: each `next`
 * returns the events past the position (at most `limit`) and moves it. With `lookBehind`, events
 * that commit out of order within {@link TAIL_LOOKBACK_MICROS} are returned too, once (after the
 * later ones), never one made before the tail's starting position.
 *
 * @example
 * ```ts
 * const tail = eventTail(db, { businessId, mode: 'test', lookBehind: database.kind === 'postgres' });
 * for (;;) for (const event of await tail.next(200)) send(event);
 * ```
 */
export function eventTail(db: Kysely<Schema>, options: TailOptions) {
  let position: Position | undefined = options.after;
  /** Where the tail started: it never returns an event at or before it. */
  let floor: Position | undefined = options.after;
  /** Ids returned whose time is within the lookback of the position, with that time. */
  const seen = new Map<string, bigint>();
  let lookedBehindAt = 0;

  const select = () => {
    let query = db
      .selectFrom('events')
      .select(['id', 'type', 'payload', microsColumn.as('micros')])
      .where('business_id', '=', options.businessId)
      .where('mode', '=', options.mode);
    if (options.types && options.types.length > 0) query = query.where('type', 'in', options.types);
    return query;
  };

  async function now(): Promise<Position> {
    const result = await sql<{ micros: string }>`
      select (extract(epoch from clock_timestamp()) * 1000000)::bigint::text as micros`.execute(db);
    return { micros: (result.rows[0] as { micros: string }).micros, id: ZERO_UUID };
  }

  /** The events stamped within the lookback behind `from` (and past the floor) not returned yet. */
  async function behind(from: Position, start: Position): Promise<TailedEvent[]> {
    const since = (BigInt(from.micros) - TAIL_LOOKBACK_MICROS).toString();
    let ids = db
      .selectFrom('events')
      .select('id')
      .where('business_id', '=', options.businessId)
      .where('mode', '=', options.mode)
      .where(sql<SqlBool>`created_at > to_timestamp(${since}::numeric / 1000000)`)
      .where(positionCondition('<', from))
      .where(positionCondition('>', start));
    if (options.types && options.types.length > 0) ids = ids.where('type', 'in', options.types);
    const missing = (await ids.execute()).map((r) => r.id).filter((id) => !seen.has(id));
    if (missing.length === 0) return [];
    return select().where('id', 'in', missing).orderBy('created_at').orderBy('id').execute();
  }

  return {
    /** Fixes the starting position (now, unless resuming): call before telling the listener it is ready. */
    async begin(): Promise<void> {
      position ??= await now();
      floor ??= position;
    },
    async next(limit: number): Promise<TailedEvent[]> {
      if (!position) position = await now();
      floor ??= position;
      const from = position;
      const fresh = await select()
        .where(positionCondition('>', from))
        .orderBy('created_at')
        .orderBy('id')
        .limit(limit)
        .execute();
      let late: TailedEvent[] = [];
      if (options.lookBehind && Date.now() - lookedBehindAt >= LOOK_BEHIND_EVERY_MS) {
        lookedBehindAt = Date.now();
        late = await behind(from, floor);
      }
      const events = late.concat(fresh);
      for (const event of events) seen.set(event.id, BigInt(event.micros));
      const last = fresh.at(-1);
      if (last) position = { micros: last.micros, id: last.id };
      const horizon = BigInt(position.micros) - TAIL_LOOKBACK_MICROS;
      for (const [id, micros] of seen) if (micros <= horizon) seen.delete(id);
      return events;
    },
  };
}
