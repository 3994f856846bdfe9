// @module-tag postgres
// @module-tag pglite
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient } from '../../../test/support/api-client.js';
import { type LoopbackReceiver, startLoopbackReceiver } from '../../../test/support/loopback-receiver.js';
import { supersedeDeliveries } from '../src/internal.js';
import { manualClock } from './fixtures/clock.js';
import { type ClockedSender, startClockedSender } from './fixtures/clocked-sender.js';
import { createdEvent, runDueFor } from './fixtures/sessions.js';
import { openTestDatabase, testStorages } from './fixtures/storage.js';

// `GET /events?delivery_status=none` and `=failed` look among the events' marks (`no_webhook`,
// `failed_delivery`) through partial indexes, not among their deliveries. A mark must follow every
// way an event gets, gains or loses such a delivery, or the filtered list and each event's own
// status disagree: each step below compares the two.

const HOUR = 3_600_000;

describe.each(testStorages())('the delivery marks of events on %s', { timeout: 120_000 }, (storage) => {
  let sender: ClockedSender;
  const receivers: LoopbackReceiver[] = [];
  const clock = manualClock();
  const KEY = `sk_test_marks_${storage}`;
  const BUSINESS = `biz-marks-${storage}`;

  beforeAll(async () => {
    sender = await startClockedSender(storage, 'event_marks', `${KEY}:${BUSINESS}:test`, clock);
  }, 60_000);
  afterAll(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    await sender?.close();
  });

  const call = (method: string, path: string, body?: unknown) =>
    // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field below
    apiClient(() => sender.url, KEY)<any>(method, path, body);

  /** A new payment's `created` event id. */
  const makeEvent = () => createdEvent(call);

  async function endpoint(url: string, fields: Record<string, unknown> = {}): Promise<string> {
    const created = await call('POST', '/webhook-endpoints', { url, ...fields });
    expect(created.status).toBe(201);
    return created.body.data.id;
  }

  /** A loopback receiver answering `status` until told otherwise. */
  async function receiver(status: number) {
    const answer = { status };
    const started = await startLoopbackReceiver({ respond: () => answer.status });
    receivers.push(started);
    return { url: started.url, answer };
  }

  /** The ids the filtered list gives, and those the whole list gives `status`: they must agree. */
  async function listed(status: 'none' | 'failed'): Promise<{ filtered: string[]; whole: string[] }> {
    const filtered = (await call('GET', `/events?delivery_status=${status}&limit=100`)).body.data;
    const all = (await call('GET', '/events?limit=100')).body.data;
    return {
      filtered: filtered.map((e: { id: string }) => e.id),
      whole: all
        .filter((e: { delivery_status: string }) => e.delivery_status === status)
        .map((e: { id: string }) => e.id),
    };
  }
  const both = (ids: string[]) => ({ filtered: ids, whole: ids });

  const runFor = (ms: number) => runDueFor(sender.worker, clock, ms);

  const marks = async (column: 'no_webhook' | 'failed_delivery') =>
    (
      await sender.database.db
        .selectFrom('events')
        .select(['id', column])
        .where('business_id', '=', BUSINESS)
        .where(column, '=', true)
        .orderBy('id')
        .execute()
    ).map((r) => r.id);

  it('marks an event that no endpoint takes, and clears the mark when a delivery to a webhook URL is added', async () => {
    // Ahead of the database's clock for the whole test, however slow the machine: a recovery's
    // window ends at the sender's now, and must hold the events made below (1 s ahead was not
    // always enough on a loaded machine).
    clock.set(new Date(Math.max(clock.now().getTime(), Date.now() + 60_000)));
    // No endpoint at all.
    const bare = await makeEvent();
    // Endpoints that do not take it: one disabled, one whose filter leaves its type out.
    const down = await receiver(500);
    const off = await endpoint(down.url);
    await call('PATCH', `/webhook-endpoints/${off}`, { status: 'disabled' });
    await endpoint(`${down.url}/filtered`, { enabled_events: ['payment.session.succeeded'] });
    const untaken = await makeEvent();
    expect(await listed('none')).toEqual(both([untaken, bare]));

    // A redelivery adds a delivery to an event that had none: it leaves the list.
    await call('PATCH', `/webhook-endpoints/${off}`, { status: 'enabled' });
    expect((await call('POST', `/events/${bare}/redeliver`)).status).toBe(202);
    expect((await call('GET', `/events/${bare}`)).body.data.delivery_status).toBe('pending');
    expect(await listed('none')).toEqual(both([untaken]));

    // So does a recovery of an endpoint that was disabled when the event was made.
    const since = new Date(Date.now() - HOUR).toISOString();
    const recovered = await call('POST', `/webhook-endpoints/${off}/recover`, { since });
    expect(recovered.status).toBe(202);
    expect(recovered.body.data.queued).toBeGreaterThan(0);
    expect(await listed('none')).toEqual(both([]));
    expect(await marks('no_webhook')).toEqual([]);
    await call('DELETE', `/webhook-endpoints/${off}`);
  });

  it('marks an event whose delivery failed for good, until its last failure is sent again; a deleted endpoint fails its pending ones', async () => {
    const a = await receiver(500);
    const b = await receiver(500);
    const first = await endpoint(a.url);
    const second = await endpoint(b.url);
    const event = await makeEvent();
    // The first test's events, failed when their endpoint was deleted.
    const before = (await listed('failed')).filtered;
    const failed = (...ids: string[]) => both([...ids, ...before]);
    expect(await listed('failed')).toEqual(failed());
    // Both deliveries fail for good after their 48 hours.
    await runFor(49 * HOUR);
    expect(await listed('failed')).toEqual(failed(event));

    // One endpoint's failure is sent again and delivered: the other's failure keeps the event failed.
    a.answer.status = 200;
    const since = new Date(clock.now().getTime() - 50 * HOUR).toISOString();
    expect((await call('POST', `/webhook-endpoints/${first}/recover`, { since })).status).toBe(202);
    expect((await call('GET', `/events/${event}`)).body.data.delivery_status).toBe('pending');
    expect(await listed('failed')).toEqual(failed());
    await runFor(HOUR);
    expect(await listed('failed')).toEqual(failed(event));
    expect(await marks('failed_delivery')).toEqual([event, ...before].sort());

    // Its last failure sent again: the mark goes.
    b.answer.status = 200;
    expect((await call('POST', `/webhook-endpoints/${second}/recover`, { since })).status).toBe(202);
    await runFor(HOUR);
    expect((await call('GET', `/events/${event}`)).body.data.delivery_status).toBe('delivered');
    expect(await listed('failed')).toEqual(failed());
    expect(await marks('failed_delivery')).toEqual([...before].sort());

    // A deleted endpoint's pending delivery ends failed, and marks its event.
    a.answer.status = 500;
    const pending = await makeEvent();
    await call('DELETE', `/webhook-endpoints/${second}`);
    await call('DELETE', `/webhook-endpoints/${first}`);
    expect((await call('GET', `/events/${pending}`)).body.data.delivery_status).toBe('failed');
    expect(await listed('failed')).toEqual(failed(pending));
    expect(await marks('failed_delivery')).toEqual([pending, ...before].sort());
  });
});

describe('the failed mark under concurrent writers on postgres', () => {
  it('a failure recorded while a redelivery clears its event keeps the mark, whichever commits first', async () => {
    const { database, cleanup } = await openTestDatabase('postgres', 'event_marks_race');
    try {
      const { db } = database;
      // An event with a failure (d0, marked) and a delivery still pending (d1).
      const event = randomUUID();
      const [d0, d1, d2] = [randomUUID(), randomUUID(), randomUUID()];
      await db
        .insertInto('events')
        .values({
          id: event,
          business_id: 'biz-race',
          mode: 'test',
          type: 'payment.session.created',
          payment_id: null,
          payload: '{}',
          failed_delivery: true,
        })
        .execute();
      await db
        .insertInto('deliveries')
        .values([
          { id: d0, event_id: event, url: 'https://a.example/hooks', status: 'failed' },
          { id: d1, event_id: event, url: 'https://b.example/hooks' },
          { id: d2, event_id: event, url: 'https://a.example/hooks' },
        ])
        .execute();
      // d1 fails for good, as the record statement does it, and its transaction stays open.
      let commit!: () => void;
      const committing = new Promise<void>((resolve) => {
        commit = resolve;
      });
      let recorded!: () => void;
      const written = new Promise<void>((resolve) => {
        recorded = resolve;
      });
      const recording = db.transaction().execute(async (tx) => {
        await sql`update deliveries set status = 'failed' where id = ${d1}`.execute(tx);
        await sql`update events set failed_delivery = true where id = ${event}`.execute(tx);
        recorded();
        await committing;
      });
      await written;
      // Meanwhile d0 is redelivered (d2 in its place): the clear waits for the event's row.
      const clearing = db.transaction().execute((tx) => supersedeDeliveries(tx, [d0], [d2]));
      const blocked = async () => {
        const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock' and query like '%failed_delivery%'`.execute(
          db,
        );
        return (rows[0]?.n ?? 0) > 0;
      };
      await expect.poll(blocked, { timeout: 10_000, interval: 10 }).toBe(true);
      commit();
      await recording;
      await clearing;
      const row = await db
        .selectFrom('events')
        .select('failed_delivery')
        .where('id', '=', event)
        .executeTakeFirstOrThrow();
      expect(row.failed_delivery).toBe(true);
    } finally {
      await cleanup();
    }
  });
});
