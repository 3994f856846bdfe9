// @module-tag pglite
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDeliveryClient, createDeliveryWorker, type Database } from '../src/index.js';
import { enqueueDeliveries } from '../src/internal.js';
import { type CountingReceiver, startCountingReceiver } from './fixtures/counting-receiver.js';
import { openTestDatabase } from './fixtures/storage.js';

// On PGlite, rows committed one after another, each waking the worker, are claimed together, not
// one claim each. Two things make them share: the worker's claim passes run one at a time (a
// wake-up during a pass makes one more pass after it, `serial-passes.ts`), and the statements
// queue on PGlite's thread behind the ones sent before them, so a claim finds the rows committed
// meanwhile. The window of new rows' wake-ups (PGLITE_WAKE_WINDOW_MS, whose timing wake.test.ts
// checks) is not what this test sees: with it removed, the claims here were 3 or 4, as with it;
// its gain is CPU under load (docs/decisions.md, "PGlite runs on a thread of its own"). A claim sets its rows'
// next_attempt_at to its lease end, which a delivered row keeps: the distinct values among the
// delivered rows are the claims that took them.

describe('new rows on PGlite', { timeout: 60_000 }, () => {
  let database: Database;
  let cleanup: () => Promise<void>;
  let receiver: CountingReceiver;

  beforeAll(async () => {
    ({ database, cleanup } = await openTestDatabase('pglite', 'wake-window'));
    receiver = await startCountingReceiver({});
  }, 60_000);
  afterAll(async () => {
    receiver?.server.close();
    await cleanup?.();
  });

  it('share claims: 24 rows committed one by one, each waking the worker, take a few claims, and each is delivered once', async () => {
    const worker = createDeliveryWorker({
      database,
      client: createDeliveryClient({ allowPrivate: true }),
      // Only the wake-ups of new rows start claims here, not the poll.
      pollIntervalMs: 60_000,
    });
    await worker.start();
    try {
      const url = receiver.url('/window');
      const events = Array.from({ length: 24 }, () => randomUUID());
      await database.db
        .insertInto('events')
        .values(
          events.map((id) => ({
            id,
            business_id: 'b',
            mode: 'test' as const,
            type: 't',
            payment_id: null,
            payload: '{}',
          })),
        )
        .execute();
      // Each its own statement and commit, sent a turn of the event loop after the previous one
      // without waiting for its answer: commits a fraction of a millisecond apart, each answer
      // waking the worker as it comes.
      const writes: Promise<unknown>[] = [];
      for (const eventId of events) {
        writes.push(enqueueDeliveries(database.db, [{ eventId, url }]));
        await new Promise((resolve) => setImmediate(resolve));
      }
      await Promise.all(writes);

      const delivered = async () => {
        const { rows } = await sql<{ n: number; claims: number }>`
          select count(*)::int as n, count(distinct next_attempt_at)::int as claims
          from deliveries where url = ${url} and status = 'delivered'`.execute(database.db);
        return rows[0] as { n: number; claims: number };
      };
      await expect.poll(async () => (await delivered()).n, { timeout: 20_000, interval: 50 }).toBe(24);
      expect(new Set(receiver.events.get('/window'))).toHaveProperty('size', 24);
      expect(receiver.events.get('/window')).toHaveLength(24);
      // Three or four claims here; a claim per commit would be 24.
      expect((await delivered()).claims).toBeLessThanOrEqual(8);
    } finally {
      await worker.stop();
    }
  });
});
