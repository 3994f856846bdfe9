// @module-tag postgres
// @module-tag pglite
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../src/index.js';
import { type Claim, claimDeliveries, otherUrlsDue } from '../src/internal.js';
import { openTestDatabase, testStorages } from './fixtures/storage.js';

const A = 'https://a.example/webhooks';
const B = 'https://b.example/webhooks';

describe.each(testStorages())('claimDeliveries on %s', (storage) => {
  let database: Database;
  let cleanup: () => Promise<void>;
  const now = new Date();

  beforeAll(async () => {
    ({ database, cleanup } = await openTestDatabase(storage, 'claim'));
    const event = randomUUID();
    await database.db
      .insertInto('events')
      .values({ id: event, business_id: 'b', mode: 'test', type: 't', payment_id: null, payload: '{"e":1}' })
      .execute();
    // A backlog of 500 rows for A, all due before the 3 rows of B.
    await sql`
      insert into deliveries (event_id, url, next_attempt_at)
      select ${event}::uuid, ${A}, ${now}::timestamptz - interval '1 hour' + i * interval '1 ms'
      from generate_series(1, 500) as i`.execute(database.db);
    await sql`
      insert into deliveries (event_id, url, next_attempt_at)
      select ${event}::uuid, ${B}, ${now}::timestamptz - interval '1 minute' + i * interval '1 ms'
      from generate_series(1, 3) as i`.execute(database.db);
  }, 60_000);
  afterAll(() => cleanup());

  /**
   * Runs `body` as the worker's claims run (`database.delivery`, its planner settings), inside a
   * transaction that is rolled back, so that every case sees the same table. On PGlite `delivery`
   * runs its function in a transaction already.
   */
  async function rolledBack(body: (tx: Parameters<typeof claimDeliveries>[0]) => Promise<void>) {
    const run = async (tx: Parameters<typeof claimDeliveries>[0]) => {
      await body(tx);
      throw new Error('rollback');
    };
    await database
      .delivery((db) => (db.isTransaction ? run(db) : db.transaction().execute(run)))
      .catch((error: Error) => {
        if (error.message !== 'rollback') throw error;
      });
  }

  /** The rows one claim takes, rolled back. */
  async function claimed(options: Omit<Parameters<typeof claimDeliveries>[1], 'leaseMs'>) {
    let claims: Claim[] = [];
    await rolledBack(async (tx) => {
      ({ claims } = await claimDeliveries(tx, { leaseMs: 60_000, ...options }));
    });
    return claims;
  }

  /** The ids of `url`'s pending rows, oldest due first. */
  async function rowsOf(tx: Parameters<typeof claimDeliveries>[0], url: string) {
    const rows = await sql<{ id: string; next_attempt_at: Date; claim_token: string | null }>`
      select id, next_attempt_at, claim_token from deliveries
      where url = ${url} and status = 'pending' order by next_attempt_at, id`.execute(tx);
    return rows.rows;
  }

  it('takes the oldest due rows, with their payload and a token each', async () => {
    const claims = await claimed({ now, limit: 10 });
    expect(claims.map((c) => c.url)).toEqual(Array(10).fill(A));
    expect(claims.every((c) => c.payload === '{"e":1}' && c.attempts === 0)).toBe(true);
    expect(new Set(claims.map((c) => c.token)).size).toBe(10);
  });

  it("returns each row's event creation time, in either form of the statement", async () => {
    const { created_at } = await database.db
      .selectFrom('events')
      .select('created_at')
      .where('payload', '=', '{"e":1}')
      .executeTakeFirstOrThrow();
    // The plain claim, then the one with per-URL limits (a statement of its own).
    for (const claims of [await claimed({ now, limit: 3 }), await claimed({ now, limit: 8, maxPerUrl: 2 })]) {
      expect(claims.length).toBeGreaterThan(0);
      for (const c of claims)
        expect(new Date(c.event_created_at).getTime()).toBe(new Date(created_at).getTime());
    }
  });

  it('leaves out the deliveries it is told to skip', async () => {
    const first = (await claimed({ now, limit: 2 })).map((c) => c.id);
    const next = await claimed({ now, limit: 2, skipIds: first });
    expect(next.map((c) => c.id).filter((id) => first.includes(id))).toEqual([]);
    expect(next).toHaveLength(2);
  });

  it("moves a paced URL's due rows to their turns, in order, and reaches the rows behind them", async () => {
    const from = new Date(now.getTime() + 5_000);
    await rolledBack(async (tx) => {
      const before = await rowsOf(tx, A);
      // The claim reads the 10 oldest due rows, all of A: none is claimed, each moves to its turn.
      const first = await claimDeliveries(tx, {
        now,
        leaseMs: 60_000,
        limit: 10,
        paced: [{ url: A, from, stepMs: 2 }],
      });
      expect(first.claims).toEqual([]);
      expect(first.paced.get(A)).toEqual({ rows: 10, until: new Date(from.getTime() + 18) });
      const after = await rowsOf(tx, A);
      // The next ten are now the oldest due; the moved ones come last, in their old order.
      expect(after.slice(0, 490).map((r) => r.id)).toEqual(before.slice(10).map((r) => r.id));
      expect(after.slice(490).map((r) => r.id)).toEqual(before.slice(0, 10).map((r) => r.id));
      expect(after.slice(490).map((r) => r.next_attempt_at.getTime() - from.getTime())).toEqual([
        0, 2, 4, 6, 8, 10, 12, 14, 16, 18,
      ]);
      expect(after.every((r) => r.claim_token === null)).toBe(true);
      // A claim that does not pace A takes its next rows, not the moved ones (not due).
      const unpaced = await claimDeliveries(tx, { now, leaseMs: 60_000, limit: 10 });
      expect(unpaced.claims.map((c) => c.id)).toEqual(before.slice(10, 20).map((r) => r.id));
      // Paced past the whole backlog in one walk, the rows of B behind it are claimed.
      const rest = await claimDeliveries(tx, {
        now,
        leaseMs: 60_000,
        limit: 600,
        paced: [{ url: A, from: new Date(from.getTime() + 20), stepMs: 2 }],
      });
      expect(rest.claims.map((c) => c.url)).toEqual([B, B, B]);
      expect(rest.paced.get(A)?.rows).toBe(480);
      const notDue = await sql<{ n: string }>`
        select count(*) as n from deliveries where url = ${A} and next_attempt_at <= ${now}`.execute(tx);
      expect(Number(notDue.rows[0]?.n)).toBe(0);
    });
  });

  it("takes a paced URL's oldest rows within its room, and moves the rest of what it reads", async () => {
    const from = new Date(now.getTime() + 5_000);
    await rolledBack(async (tx) => {
      const before = await rowsOf(tx, A);
      const r = await claimDeliveries(tx, {
        now,
        leaseMs: 60_000,
        limit: 10,
        paced: [{ url: A, from, stepMs: 2, room: 3 }],
      });
      expect(r.claims.map((c) => c.id)).toEqual(before.slice(0, 3).map((row) => row.id));
      expect(r.paced.get(A)).toEqual({ rows: 7, until: new Date(from.getTime() + 12) });
      const moved = (await rowsOf(tx, A)).filter((row) => before.slice(3, 10).some((b) => b.id === row.id));
      expect(moved.map((row) => row.next_attempt_at.getTime() - from.getTime())).toEqual([
        0, 2, 4, 6, 8, 10, 12,
      ]);
    });
  });

  it('paces only the rows it reads, and claims the other URLs within their limits', async () => {
    // 500 rows of A then 3 of B: a walk of 501 rows moves all of A's and claims B's first; a walk
    // of 503 claims two of B's, its limit.
    let result: Awaited<ReturnType<typeof claimDeliveries>> | undefined;
    let aheadOfB = -1;
    await rolledBack(async (tx) => {
      result = await claimDeliveries(tx, {
        now,
        leaseMs: 60_000,
        limit: 501,
        maxPerUrl: 2,
        paced: [{ url: A, from: new Date(now.getTime() + 1_000), stepMs: 1 }],
      });
      aheadOfB = (await rowsOf(tx, A)).filter((r) => r.next_attempt_at <= now).length;
    });
    expect(result?.claims.map((c) => c.url)).toEqual([B]);
    expect(result?.paced.get(A)?.rows).toBe(500);
    expect(aheadOfB).toBe(0);
    const two = await claimed({
      now,
      limit: 503,
      maxPerUrl: 2,
      paced: [{ url: A, from: new Date(now.getTime() + 1_000), stepMs: 1 }],
    });
    expect(two.map((c) => c.url)).toEqual([B, B]);
  });

  it('takes no more rows of a URL than its limit, and only those: the rest stay due, untouched', async () => {
    // The claim reads the 8 oldest due rows, all of A, and keeps the 2 oldest: A's limit.
    const claims = await claimed({ now, limit: 8, maxPerUrl: 4, urlLimits: new Map([[A, 2]]) });
    const unlimited = await claimed({ now, limit: 8 });
    expect(claims.map((c) => c.id)).toEqual(unlimited.slice(0, 2).map((c) => c.id));
    expect((await claimed({ now, limit: 8, maxPerUrl: 4 })).map((c) => c.url)).toEqual([A, A, A, A]);
    // Within one transaction: the rows it did not keep are neither claimed nor moved, and on
    // PostgreSQL another session can lock all of them (PGlite has one session).
    let rest = 0;
    let lockable: number | undefined;
    await database
      .delivery(async (db) => {
        const run = async (tx: Parameters<typeof claimDeliveries>[0]) => {
          const { claims: kept } = await claimDeliveries(tx, {
            now,
            leaseMs: 60_000,
            limit: 8,
            maxPerUrl: 1,
          });
          expect(kept.map((c) => c.url)).toEqual([A]);
          const untouched = await sql<{ n: string }>`
            select count(*) as n from deliveries
            where url = ${A} and claim_token is null and next_attempt_at < ${now}`.execute(tx);
          rest = Number(untouched.rows[0]?.n);
          if (storage === 'postgres') {
            const other = await sql<{ id: string }>`
              select id from deliveries where url = ${A} and status = 'pending'
              for update skip locked`.execute(database.db);
            lockable = other.rows.length;
          }
          throw new Error('rollback');
        };
        return db.isTransaction ? run(db) : db.transaction().execute(run);
      })
      .catch((error: Error) => {
        if (error.message !== 'rollback') throw error;
      });
    expect(rest).toBe(499);
    expect(lockable).toBe(storage === 'postgres' ? 499 : undefined);
  });

  it('tells whether a row of another URL than those named is due, as the worker asks before it paces', async () => {
    const due = (urls: string[], at = now) => database.delivery((db) => otherUrlsDue(db, { now: at, urls }));
    // B's rows are due behind A's backlog; none but theirs are pending.
    expect(await due([A])).toBe(true);
    expect(await due([A, B])).toBe(false);
    expect(await due([B])).toBe(true);
    // Half an hour ago, only A's rows were due.
    expect(await due([A], new Date(now.getTime() - 30 * 60 * 1000))).toBe(false);
  });

  it('leaves rows not yet due', async () => {
    expect(await claimed({ now: new Date(now.getTime() - 2 * 60 * 60 * 1000), limit: 10 })).toEqual([]);
  });
});
