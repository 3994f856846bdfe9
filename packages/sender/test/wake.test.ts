// @module-tag postgres
// @module-tag pglite
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createWakeSignal, windowed } from '../src/db/wake.js';
import { type Database, openDatabase } from '../src/index.js';
import { enqueueDeliveries, WAKE_CHANNEL } from '../src/internal.js';
import { openTestDatabase, TEST_DATABASE_URL, testStorages } from './fixtures/storage.js';

const settle = () => new Promise((resolve) => setTimeout(resolve, 200));

describe('the wake signal', () => {
  it('fires after the commit of a transaction that wrote the mark, never on a rollback', () => {
    const sent: string[] = [];
    let woken = 0;
    const wake = createWakeSignal(async (id) => {
      sent.push(id);
    });
    wake.subscribe(() => woken++);
    const conn = wake.tracker();
    conn.before('begin');
    conn.after('begin', false);
    conn.after('insert ...', true);
    expect(woken).toBe(0);
    conn.after('commit', false);
    expect(woken).toBe(1);
    expect(sent).toEqual([wake.id]);

    conn.before('begin');
    conn.after('insert ...', true);
    conn.after('rollback', false);
    conn.before('start transaction isolation level serializable');
    conn.after('commit', false);
    expect(woken).toBe(1);

    // Outside a transaction, a statement commits by itself: at once.
    conn.after('insert ...', true);
    expect(woken).toBe(2);
    // A statement without the mark wakes no one.
    conn.after('select 1', false);
    expect(woken).toBe(2);
  });

  it('sends one NOTIFY at a time, and one more for the wake-ups that came meanwhile', async () => {
    let sending = 0;
    let most = 0;
    let sent = 0;
    const wake = createWakeSignal(async () => {
      sending++;
      most = Math.max(most, sending);
      await settle();
      sent++;
      sending--;
    });
    for (let i = 0; i < 100; i++) wake.fire();
    await expect.poll(() => sent, { timeout: 2000 }).toBe(2);
    await settle();
    expect(sent).toBe(2);
    expect(most).toBe(1);
  });
});

describe('a wake-up window', () => {
  it('wakes at once after a quiet window, once at its end for the calls within it, and never after cancel', () => {
    vi.useFakeTimers();
    try {
      let woken = 0;
      const window = windowed(() => woken++, 4);
      window.wake();
      expect(woken).toBe(1);
      for (let i = 0; i < 10; i++) window.wake();
      expect(woken).toBe(1);
      vi.advanceTimersByTime(4);
      expect(woken).toBe(2);
      // That call opened the next window, which closes quietly.
      vi.advanceTimersByTime(4);
      expect(woken).toBe(2);
      window.wake();
      expect(woken).toBe(3);
      window.wake();
      window.cancel();
      vi.advanceTimersByTime(20);
      expect(woken).toBe(3);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe.each(testStorages())('waking the workers on %s', { timeout: 60_000 }, (storage) => {
  let database: Database;
  let cleanup: () => Promise<void>;
  let event: string;

  beforeAll(async () => {
    ({ database, cleanup } = await openTestDatabase(storage, 'wake'));
    event = randomUUID();
    await database.db
      .insertInto('events')
      .values({ id: event, business_id: 'b', mode: 'test', type: 't', payment_id: null, payload: '{}' })
      .execute();
  }, 60_000);
  afterAll(() => cleanup());

  async function counting() {
    let wakes = 0;
    const stop = await database.listen(WAKE_CHANNEL, () => {
      wakes++;
    });
    await settle();
    const count = () => wakes;
    return { count, reset: () => (wakes = 0), stop };
  }

  it('wakes once the deliveries are committed, not before, and not for a rollback', async () => {
    const wakes = await counting();
    try {
      wakes.reset();
      let before = -1;
      await database.db.transaction().execute(async (tx) => {
        await enqueueDeliveries(tx, [{ eventId: event, url: 'https://a.example/' }]);
        await settle();
        before = wakes.count();
      });
      expect(before).toBe(0);
      await expect.poll(wakes.count, { timeout: 5000 }).toBe(1);

      await database.db
        .transaction()
        .execute(async (tx) => {
          await enqueueDeliveries(tx, [{ eventId: event, url: 'https://b.example/' }]);
          throw new Error('rolled back');
        })
        .catch(() => {});
      await settle();
      expect(wakes.count()).toBe(1);
      // Rolled back: the row is not there either.
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from deliveries
        where url = 'https://b.example/'`.execute(database.db);
      expect(rows[0]?.n).toBe(0);
    } finally {
      await wakes.stop();
    }
  });

  it('sends no NOTIFY inside the transaction that writes the deliveries', async () => {
    // The statements keep the mark, not the NOTIFY: a writer's commit never waits on the
    // notification queue's lock (the lock every notifying transaction holds through its commit).
    const { writeEventStatement } = await import('../src/internal.js');
    const compiled = writeEventStatement(database.db, {
      id: randomUUID(),
      businessId: 'b',
      mode: 'test',
      type: 't',
      paymentId: randomUUID(),
      payload: '{}',
    });
    expect(compiled.sql).not.toMatch(/pg_notify/i);
    expect(compiled.sql).toMatch(/payhook_wake/);
  });

  // PGlite's directory is one process's: no other instance to wake.
  if (storage === 'postgres')
    it('wakes the workers of another instance on the same database by a NOTIFY, and not itself twice', async () => {
      const schema = (await sql<{ schema: string }>`select current_schema() as schema`.execute(database.db))
        .rows[0]?.schema as string;
      const other = await openDatabase({ url: TEST_DATABASE_URL, schema });
      const wakes = await counting();
      let otherWakes = 0;
      const stop = await other.listen(WAKE_CHANNEL, () => {
        otherWakes++;
      });
      try {
        await settle();
        wakes.reset();
        otherWakes = 0;
        await enqueueDeliveries(database.db, [{ eventId: event, url: 'https://c.example/' }]);
        await expect.poll(() => otherWakes, { timeout: 5000 }).toBe(1);
        await settle();
        expect(wakes.count()).toBe(1);
      } finally {
        await stop();
        await other.close();
        await wakes.stop();
      }
    });
});
