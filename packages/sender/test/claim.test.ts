import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../src/index.js';
import { claimDeliveries } from '../src/internal.js';
import { openTestDatabase } from './fixtures/storage.js';

const A = 'https://a.example/webhooks';
const B = 'https://b.example/webhooks';

describe.each(['postgres', 'pglite'] as const)('claimDeliveries on %s', (storage) => {
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
   * Claims as the worker does (`database.delivery`, its planner settings), inside a transaction
   * that is rolled back, so that every case sees the same table. On PGlite `delivery` runs its
   * function in a transaction already.
   */
  async function claimed(options: Omit<Parameters<typeof claimDeliveries>[1], 'leaseMs'>) {
    let claims: Awaited<ReturnType<typeof claimDeliveries>> = [];
    const body = async (tx: Parameters<typeof claimDeliveries>[0]) => {
      claims = await claimDeliveries(tx, { leaseMs: 60_000, ...options });
      throw new Error('rollback');
    };
    await database
      .delivery((db) => (db.isTransaction ? body(db) : db.transaction().execute(body)))
      .catch((error: Error) => {
        if (error.message !== 'rollback') throw error;
      });
    return claims;
  }

  it('takes the oldest due rows, with their payload and a token each', async () => {
    const claims = await claimed({ now, limit: 10 });
    expect(claims.map((c) => c.url)).toEqual(Array(10).fill(A));
    expect(claims.every((c) => c.payload === '{"e":1}' && c.attempts === 0)).toBe(true);
    expect(new Set(claims.map((c) => c.token)).size).toBe(10);
  });

  it('leaves out the URLs and the deliveries it is told to skip', async () => {
    expect((await claimed({ now, limit: 10, skipUrls: [A] })).map((c) => c.url)).toEqual([B, B, B]);
    const first = (await claimed({ now, limit: 2 })).map((c) => c.id);
    const next = await claimed({ now, limit: 2, skipIds: first });
    expect(next.map((c) => c.id).filter((id) => first.includes(id))).toEqual([]);
    expect(next).toHaveLength(2);
  });

  it('takes no more rows of a URL than its limit, and only those: the rest stay due, untouched', async () => {
    // The claim reads the 8 oldest due rows, all of A, and keeps the 2 oldest: A's limit.
    const claims = await claimed({ now, limit: 8, maxPerUrl: 4, urlLimits: new Map([[A, 2]]) });
    const unlimited = await claimed({ now, limit: 8 });
    expect(claims.map((c) => c.id)).toEqual(unlimited.slice(0, 2).map((c) => c.id));
    expect((await claimed({ now, limit: 8, maxPerUrl: 4 })).map((c) => c.url)).toEqual([A, A, A, A]);
    // A URL at its limit is skipped: the rows behind its backlog are reached.
    expect((await claimed({ now, limit: 8, maxPerUrl: 2, skipUrls: [A] })).map((c) => c.url)).toEqual([B, B]);
    // Within one transaction: the rows it did not keep are neither claimed nor moved, and on
    // PostgreSQL another session can lock all of them (PGlite has one session).
    let rest = 0;
    let lockable: number | undefined;
    await database
      .delivery(async (db) => {
        const run = async (tx: Parameters<typeof claimDeliveries>[0]) => {
          const kept = await claimDeliveries(tx, { now, leaseMs: 60_000, limit: 8, maxPerUrl: 1 });
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

  it('leaves rows not yet due', async () => {
    expect(await claimed({ now: new Date(now.getTime() - 2 * 60 * 60 * 1000), limit: 10 })).toEqual([]);
  });
});
