import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimDeliveries, type Database } from '../src/index.js';
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
    let urls: string[] = [];
    const body = async (tx: Parameters<typeof claimDeliveries>[0]) => {
      urls = (await claimDeliveries(tx, { leaseMs: 60_000, ...options })).map((c) => c.url);
      throw new Error('rollback');
    };
    await database
      .delivery((db) => (db.isTransaction ? body(db) : db.transaction().execute(body)))
      .catch((error: Error) => {
        if (error.message !== 'rollback') throw error;
      });
    return urls;
  }

  it('takes the oldest due rows in due order without per-URL limits', async () => {
    expect(await claimed({ now, limit: 10 })).toEqual(Array(10).fill(A));
  });

  it('takes at most perUrlLimit rows of a URL, then the next URLs, oldest first', async () => {
    expect(await claimed({ now, limit: 10, perUrlLimit: 4 })).toEqual([A, A, A, A, B, B, B]);
  });

  it('takes what urlLimits leaves of a URL, and nothing of a URL at 0, whatever its backlog', async () => {
    expect(await claimed({ now, limit: 10, perUrlLimit: 4, urlLimits: new Map([[A, 1]]) })).toEqual([
      A,
      B,
      B,
      B,
    ]);
    expect(await claimed({ now, limit: 10, perUrlLimit: 4, urlLimits: new Map([[A, 0]]) })).toEqual([
      B,
      B,
      B,
    ]);
    expect(await claimed({ now, limit: 2, perUrlLimit: 4, urlLimits: new Map([[A, 0]]) })).toEqual([B, B]);
  });

  it('leaves rows not yet due', async () => {
    const before = new Date(now.getTime() - 2 * 60 * 60 * 1000);
    expect(await claimed({ now: before, limit: 10 })).toEqual([]);
    expect(await claimed({ now: before, limit: 10, perUrlLimit: 4 })).toEqual([]);
  });
});
