import { createHash, randomUUID } from 'node:crypto';
import { type RawBuilder, sql } from 'kysely';
import type { Database } from '../db/database.js';

/**
 * This instance's place among `count` live delivery workers (`rank`, in id order). Each URL's
 * per-URL limit is split among them as slots: slot k of a URL goes to the instance of rank
 * `(h + k) mod count`, where h is the first 32 bits of the URL's MD5, so the limit holds across
 * instances and every instance gets a part of every URL while there are no more instances than
 * slots (docs/decisions.md, "The per-URL limit across instances").
 */
export interface UrlShare {
  count: number;
  rank: number;
}

const hashes = new Map<string, number>();

/** The first 32 bits of the URL's MD5, unsigned: what {@link slotsSql} computes in the database. */
function urlHash(url: string): number {
  let h = hashes.get(url);
  if (h === undefined) {
    if (hashes.size >= 10_000) hashes.clear();
    h = Number.parseInt(createHash('md5').update(url).digest('hex').slice(0, 8), 16);
    hashes.set(url, h);
  }
  return h;
}

/** How many of `url`'s `perUrl` slots are this instance's under `share` (all of them while alone). */
export function slotsOf(url: string, perUrl: number, share: UrlShare | undefined): number {
  if (!share || share.count <= 1) return perUrl;
  const d = (((share.rank - urlHash(url)) % share.count) + share.count) % share.count;
  return d < perUrl ? Math.floor((perUrl - 1 - d) / share.count) + 1 : 0;
}

/**
 * This instance's slots of a URL whose concurrency is `limit` over every instance (learnt by
 * `UrlConcurrency`): all of it while alone; with others, its part of the URL's starting `perUrl`
 * slots ({@link slotsOf}, which also says who sends to the URL at all) scaled to the limit, at
 * least one where it has a part.
 */
export function slotsHere(url: string, limit: number, perUrl: number, share: UrlShare | undefined): number {
  if (!share || share.count <= 1) return limit;
  const part = slotsOf(url, perUrl, share);
  return part <= 0 ? 0 : Math.max(1, Math.floor((limit * part) / perUrl));
}

/** {@link slotsOf} in SQL, over the column `url` (the same hash, the same arithmetic). */
export function slotsSql(perUrl: number, share: UrlShare): RawBuilder<number> {
  const h = sql`('x' || lpad(left(md5(url), 8), 16, '0'))::bit(64)::bigint`;
  const n = sql`${share.count}::bigint`;
  const d = sql`mod(mod(${share.rank}::bigint - ${h}, ${n}) + ${n}, ${n})`;
  return sql<number>`(case when ${d} < ${perUrl} then (${perUrl - 1}::bigint - ${d}) / ${n} + 1 else 0 end)::int`;
}

/** Options of {@link joinDeliveryInstances}. */
export interface MembershipOptions {
  /** How often the instance says it is alive and reads who else is (default 2 s). */
  heartbeatMs?: number;
  /** An instance not heard from for this long is gone; its slots pass to the others (default 10 s). */
  expireMs?: number;
  /** Called when the share changes (an instance joined or left), after the first read. */
  onChange?: (share: UrlShare) => void;
  /** Where a failed heartbeat goes (the share stays as last read). */
  onError?: (error: unknown) => void;
}

/** This instance's place among the delivery workers on one database. */
export interface Membership {
  /** The share as last read: `{ count: 1, rank: 0 }`, every slot, while alone. */
  share(): UrlShare;
  /** Stops the heartbeat and leaves at once, so the others take this instance's slots at their next beat. */
  leave(): Promise<void>;
}

/**
 * Joins the delivery workers sharing `database`: a row in `delivery_instances`, its `seen_at`
 * renewed every heartbeat, and the live rows (seen within `expireMs`) read back in id order to
 * give this instance's rank. Rows long gone are deleted by whoever beats.
 *
 * @example
 * ```ts
 * const membership = await joinDeliveryInstances(database, { onChange: (share) => log.info(share) });
 * const mine = slotsOf(url, 4, membership.share()); // attempts this instance may send to url at once
 * ```
 */
export async function joinDeliveryInstances(
  database: Database,
  options: MembershipOptions = {},
): Promise<Membership> {
  const heartbeatMs = options.heartbeatMs ?? 2000;
  const expireMs = options.expireMs ?? 10_000;
  const id = randomUUID();
  let current: UrlShare = { count: 1, rank: 0 };
  let left = false;
  /** The heartbeat under way, which `leave()` waits for so that it cannot write the row back. */
  let beating: Promise<void> | undefined;

  async function beat(): Promise<void> {
    const live = await database.db.transaction().execute(async (tx) => {
      await sql`insert into delivery_instances (id, seen_at) values (${id}, clock_timestamp())
        on conflict (id) do update set seen_at = excluded.seen_at`.execute(tx);
      await sql`delete from delivery_instances where seen_at < clock_timestamp() - make_interval(secs => ${(10 * expireMs) / 1000})`.execute(
        tx,
      );
      const rows = await sql<{ id: string }>`select id from delivery_instances
        where seen_at >= clock_timestamp() - make_interval(secs => ${expireMs / 1000}) order by id`.execute(
        tx,
      );
      return rows.rows.map((r) => r.id);
    });
    const rank = live.indexOf(id);
    const next = { count: Math.max(1, live.length), rank: Math.max(0, rank) };
    if (left) return;
    if (next.count !== current.count || next.rank !== current.rank) {
      current = next;
      options.onChange?.(next);
    }
  }

  await beat();
  const timer = setInterval(() => {
    if (beating) return;
    beating = beat()
      .catch((error: unknown) => options.onError?.(error))
      .finally(() => {
        beating = undefined;
      });
  }, heartbeatMs);
  timer.unref();

  return {
    share: () => current,
    async leave() {
      left = true;
      clearInterval(timer);
      await beating;
      await sql`delete from delivery_instances where id = ${id}`.execute(database.db);
    },
  };
}
