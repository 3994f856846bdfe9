// @module-tag postgres
// @module-tag pglite
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient } from '../../../test/support/api-client.js';
import { type LoopbackReceiver, startLoopbackReceiver } from '../../../test/support/loopback-receiver.js';
import { recoverEndpoint } from '../src/delivery/recover.js';
import { buildApp, loadConfig } from '../src/index.js';
import { manualClock } from './fixtures/clock.js';
import { type ClockedSender, startClockedSender } from './fixtures/clocked-sender.js';
import { createdEvent, runDueFor } from './fixtures/sessions.js';
import { testStorages } from './fixtures/storage.js';

const HOUR = 3_600_000;
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each(testStorages())('recovering an endpoint on %s', { timeout: 120_000 }, (storage) => {
  let sender: ClockedSender;
  const KEY = `sk_test_recover_${storage}`;
  const OTHER = `sk_test_recover_other_${storage}`;
  const clock = manualClock();
  const receivers: LoopbackReceiver[] = [];
  /** What the first receiver answers, per event id (500 unless set). */
  const answers = new Map<string, number>();

  beforeAll(async () => {
    sender = await startClockedSender(
      storage,
      'recover',
      `${KEY}:biz-recover:test,${OTHER}:biz-recover-other:test`,
      clock,
    );
  }, 60_000);
  afterAll(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    await sender?.close();
  });

  const call = (method: string, path: string, body?: unknown, key = KEY) =>
    // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field below
    apiClient(() => sender.url, key)<any>(method, path, body);

  async function endpoint(url: string, key = KEY): Promise<string> {
    const created = await call('POST', '/webhook-endpoints', { url }, key);
    expect(created.status).toBe(201);
    return created.body.data.id;
  }

  const makeEvent = (key = KEY) => createdEvent((method, path, body) => call(method, path, body, key));
  const runFor = (ms: number) => runDueFor(sender.worker, clock, ms);

  const rowsOf = (endpointId: string) =>
    sender.database.db
      .selectFrom('deliveries')
      .select(['id', 'event_id', 'status', 'attempts', 'superseded_by', 'next_attempt_at', 'claim_token'])
      .where('endpoint_id', '=', endpointId)
      .orderBy('id')
      .execute();

  it('queues each failed or never-attempted delivery of the window once, with a fresh 48 hours; never a delivered one; nothing of another endpoint or business', async () => {
    clock.set(new Date(Math.max(clock.now().getTime(), Date.now() + 1000)));
    const mine = await startLoopbackReceiver({
      respond: (request) => answers.get(request.headers['payhook-event-id'] as string) ?? 500,
    });
    const other = await startLoopbackReceiver({ respond: 500 });
    const foreign = await startLoopbackReceiver({ respond: 500 });
    receivers.push(mine, other, foreign);
    const e1 = await endpoint(mine.url);
    const e2 = await endpoint(other.url);
    const eb = await endpoint(foreign.url, OTHER);

    // Before the window: a failure, here and in the other business.
    const before = await makeEvent();
    await makeEvent(OTHER);
    await runFor(49 * HOUR);
    await pause(20);
    const since = new Date();
    await pause(20);
    // In the window: delivered, failed, being retried, never attempted, never made (disabled).
    const delivered = await makeEvent();
    answers.set(delivered, 200);
    const failed = await makeEvent();
    await runFor(49 * HOUR);
    const retried = await makeEvent();
    await sender.worker.runDue();
    const unattempted = await makeEvent();
    await call('PATCH', `/webhook-endpoints/${e1}`, { status: 'disabled' });
    const missed = await makeEvent();
    await call('PATCH', `/webhook-endpoints/${e1}`, { status: 'enabled' });
    await makeEvent(OTHER);

    const statusOf = async (eventId: string) =>
      (await rowsOf(e1)).filter((r) => r.event_id === eventId).map((r) => [r.status, r.attempts]);
    expect(await statusOf(before)).toEqual([['failed', 11]]);
    expect(await statusOf(delivered)).toEqual([['delivered', 1]]);
    expect(await statusOf(failed)).toEqual([['failed', 11]]);
    expect(await statusOf(retried)).toEqual([['pending', 1]]);
    expect(await statusOf(unattempted)).toEqual([['pending', 0]]);
    expect(await statusOf(missed)).toEqual([]);
    const othersBefore = [...(await rowsOf(e2)), ...(await rowsOf(eb))];

    const recovered = await call('POST', `/webhook-endpoints/${e1}/recover`, {
      since: since.toISOString(),
    });
    expect(recovered.status).toBe(202);
    expect(recovered.body.data).toMatchObject({ endpoint_id: e1, queued: 3 });
    expect(recovered.body.data.since).toBe(since.toISOString().replace('Z', '000Z'));
    // Nothing of the other endpoint or the other business changed.
    expect([...(await rowsOf(e2)), ...(await rowsOf(eb))]).toEqual(othersBefore);
    // The failure is replaced by a new delivery (never attempted: its 48 hours start at its first attempt).
    const failedRows = (await rowsOf(e1)).filter((r) => r.event_id === failed);
    expect(failedRows).toHaveLength(2);
    const fresh = failedRows.find((r) => r.status === 'pending');
    expect(fresh).toMatchObject({ attempts: 0 });
    expect(failedRows.find((r) => r.status === 'failed')?.superseded_by).toBe(fresh?.id);
    expect(await statusOf(before)).toEqual([['failed', 11]]);

    // Recovering again before the worker runs makes no second delivery of anything.
    const again = await call('POST', `/webhook-endpoints/${e1}/recover`, { since: since.toISOString() });
    expect(again.body.data.queued).toBe(3);
    expect((await rowsOf(e1)).length).toBe(7);

    for (const id of [failed, unattempted, missed, retried]) answers.set(id, 200);
    const seen = mine.received.length;
    await sender.worker.runDue();
    const sent = mine.received.slice(seen).map((r) => r.headers['payhook-event-id']);
    // The recovered three, and the one being retried: disabling held it, enabling made it due.
    expect(sent.sort()).toEqual([failed, unattempted, missed, retried].sort());
    // The delivered event was never sent again.
    expect(mine.received.filter((r) => r.headers['payhook-event-id'] === delivered)).toHaveLength(1);
    expect(await statusOf(delivered)).toEqual([['delivered', 1]]);
    // Nothing left to recover.
    expect(
      (await call('POST', `/webhook-endpoints/${e1}/recover`, { since: since.toISOString() })).body.data
        .queued,
    ).toBe(0);
  });

  it("respects the endpoint's filter: a failed event of a type it no longer takes is left alone", async () => {
    const receiver = await startLoopbackReceiver({ respond: 500 });
    receivers.push(receiver);
    const id = await endpoint(receiver.url);
    const since = new Date(Date.now() - 1000);
    const event = await makeEvent();
    await runFor(49 * HOUR);
    expect((await rowsOf(id)).filter((r) => r.event_id === event).map((r) => r.status)).toEqual(['failed']);
    await call('PATCH', `/webhook-endpoints/${id}`, { enabled_events: ['payment.session.failed'] });
    const filtered = await call('POST', `/webhook-endpoints/${id}/recover`, { since: since.toISOString() });
    expect(filtered.body.data.queued).toBe(0);
    expect((await rowsOf(id)).filter((r) => r.event_id === event)).toHaveLength(1);
    // Made while the filter left its type out: no delivery.
    const leftOut = await makeEvent();
    expect((await rowsOf(id)).filter((r) => r.event_id === leftOut)).toEqual([]);
    await call('PATCH', `/webhook-endpoints/${id}`, { enabled_events: ['*'] });
    const all = await call('POST', `/webhook-endpoints/${id}/recover`, { since: since.toISOString() });
    expect(all.body.data.queued).toBeGreaterThanOrEqual(2);
    expect((await rowsOf(id)).filter((r) => r.event_id === event)).toHaveLength(2);
    expect((await rowsOf(id)).filter((r) => r.event_id === leftOut).map((r) => r.status)).toEqual([
      'pending',
    ]);
  });

  it('recovers each event once when recoveries of one endpoint run at the same time', async () => {
    const receiver = await startLoopbackReceiver({ respond: 500 });
    receivers.push(receiver);
    const id = await endpoint(receiver.url);
    const since = new Date(Date.now() - 1000);
    const events = [await makeEvent(), await makeEvent(), await makeEvent()];
    await runFor(49 * HOUR);
    const answers = await Promise.all(
      Array.from({ length: 4 }, () =>
        call('POST', `/webhook-endpoints/${id}/recover`, { since: since.toISOString() }),
      ),
    );
    expect(answers.map((a) => a.status)).toEqual([202, 202, 202, 202]);
    const rows = await rowsOf(id);
    for (const event of events) {
      const mine = rows.filter((r) => r.event_id === event);
      // The failure, and one new delivery in its place: never two.
      expect(mine.filter((r) => r.status === 'pending')).toHaveLength(1);
      expect(mine.filter((r) => r.status === 'failed').map((r) => r.superseded_by)).toEqual([
        mine.find((r) => r.status === 'pending')?.id,
      ]);
    }
  });

  it('reads the window in batches: three recoveries at once, in batches of 1, 2 and 3, queue each of 5 events once', async () => {
    const receiver = await startLoopbackReceiver({ respond: 500 });
    receivers.push(receiver);
    const id = await endpoint(receiver.url);
    const since = new Date(Date.now() - 1000);
    const events: string[] = [];
    for (let i = 0; i < 5; i++) events.push(await makeEvent());
    await runFor(49 * HOUR);
    const row = await sender.database.db
      .selectFrom('webhook_endpoints')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    const window = { since, until: new Date(Date.now() + 1000), now: clock.now() };
    const runs = await Promise.all(
      [1, 2, 3].map((batch) => recoverEndpoint(sender.database.db, row, window, { batch })),
    );
    // Together they made one delivery per event (which run made which is the race's).
    expect(runs.reduce((sum, r) => sum + r.created, 0)).toBe(5);
    const rows = await rowsOf(id);
    for (const event of events) {
      expect(rows.filter((r) => r.event_id === event && r.status === 'pending')).toHaveLength(1);
    }
  });

  it('a recovery cut short after two batches queues the rest when run again: every event once', async () => {
    const receiver = await startLoopbackReceiver({ respond: 500 });
    receivers.push(receiver);
    const id = await endpoint(receiver.url);
    const since = new Date(Date.now() - 1000);
    const failed = [await makeEvent(), await makeEvent(), await makeEvent()];
    await runFor(49 * HOUR);
    // Three more made while it was disabled: no delivery to it at all.
    await call('PATCH', `/webhook-endpoints/${id}`, { status: 'disabled' });
    const missed = [await makeEvent(), await makeEvent(), await makeEvent()];
    await call('PATCH', `/webhook-endpoints/${id}`, { status: 'enabled' });
    const row = await sender.database.db
      .selectFrom('webhook_endpoints')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    const window = { since, until: new Date(Date.now() + 1000), now: clock.now() };
    const progress: number[] = [];
    const cut = new Error('the process is gone');
    await expect(
      recoverEndpoint(sender.database.db, row, window, {
        batch: 1,
        onProgress: (p) => {
          // Reported after each batch committed, with the rows read so far.
          progress.push(p.rows);
          if (progress.length === 2) throw cut;
        },
      }),
    ).rejects.toBe(cut);
    expect(progress).toEqual([1, 2]);
    const again = await recoverEndpoint(sender.database.db, row, window, { batch: 1 });
    const rows = await rowsOf(id);
    for (const event of [...failed, ...missed]) {
      expect(
        rows.filter((r) => r.event_id === event && r.status === 'pending'),
        event,
      ).toHaveLength(1);
    }
    // The first run's two committed batches made two; the second made the other four.
    expect(again.created).toBe(4);
    expect(rows.filter((r) => r.status === 'failed').map((r) => r.superseded_by !== null)).toEqual([
      true,
      true,
      true,
    ]);
  });

  it('refuses a window it cannot take with a stable code and the field, and another business with 404', async () => {
    const receiver = await startLoopbackReceiver({ respond: 200 });
    receivers.push(receiver);
    const id = await endpoint(receiver.url);
    const now = clock.now().getTime();
    const cases: [unknown, number, string, string | undefined][] = [
      [{ since: new Date(now - 15 * 24 * HOUR).toISOString() }, 422, 'validation_failed', 'since'],
      [
        { since: new Date(now - HOUR).toISOString(), until: new Date(now - 2 * HOUR).toISOString() },
        422,
        'validation_failed',
        'until',
      ],
      [
        { since: new Date(now - HOUR).toISOString(), until: new Date(now - HOUR).toISOString() },
        422,
        'validation_failed',
        'until',
      ],
      [{ since: 'yesterday' }, 422, 'validation_failed', 'since'],
      [{ since: '0000-01-01T00:00:00Z' }, 422, 'validation_failed', 'since'],
      [{ since: new Date(now - HOUR).toISOString(), until: 'soon' }, 422, 'validation_failed', 'until'],
      [{}, 422, 'validation_failed', 'since'],
      [{ since: 5 }, 422, 'validation_failed', 'since'],
      [{ since: new Date(now - HOUR).toISOString(), extra: true }, 422, 'validation_failed', undefined],
      [[], 400, 'invalid_request', undefined],
      ['x'.repeat(41), 400, 'invalid_request', undefined],
    ];
    for (const [body, status, code, field] of cases) {
      const answer = await call('POST', `/webhook-endpoints/${id}/recover`, body);
      expect(answer.status, JSON.stringify(body)).toBe(status);
      expect(answer.body.error.code, JSON.stringify(body)).toBe(code);
      if (field) expect(answer.body.error.details.map((d: { field: string }) => d.field)).toContain(field);
    }
    const since = new Date(now - HOUR).toISOString();
    for (const path of [`/webhook-endpoints/${id}/recover`, '/webhook-endpoints/not-a-uuid/recover']) {
      const refused = await call('POST', path, { since }, path.includes(id) ? OTHER : KEY);
      expect(refused.status).toBe(404);
      expect(refused.body.error.code).toBe('not_found');
    }
    // Replayed under its Idempotency-Key: the same answer, nothing queued twice.
    const headers = {
      authorization: `Bearer ${KEY}`,
      'content-type': 'application/json',
      'idempotency-key': `recover-${storage}`,
    };
    const once = await fetch(`${sender.url}/webhook-endpoints/${id}/recover`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ since }),
    });
    const twice = await fetch(`${sender.url}/webhook-endpoints/${id}/recover`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ since }),
    });
    expect(once.status).toBe(202);
    expect(await twice.json()).toEqual(await once.json());
  });

  it('refuses a window past retention with 422 naming the horizon', async () => {
    const kept = await buildApp({
      database: sender.database,
      config: loadConfig({ PAYHOOK_API_KEYS: `${KEY}:biz-recover:test`, PAYHOOK_RETENTION_DAYS: '7' }),
      logger: false,
      now: clock.now,
    });
    try {
      const id = (await call('POST', '/webhook-endpoints', { url: 'https://kept.example/hook' })).body.data
        .id;
      const now = clock.now().getTime();
      const answer = await kept.inject({
        method: 'POST',
        url: `/webhook-endpoints/${id}/recover`,
        headers: { authorization: `Bearer ${KEY}` },
        payload: { since: new Date(now - 10 * 24 * HOUR).toISOString() },
      });
      expect(answer.statusCode).toBe(422);
      const [detail] = answer.json().error.details;
      expect(detail.field).toBe('since');
      expect(detail.message).toContain('kept 7 days (PAYHOOK_RETENTION_DAYS)');
      expect(detail.message).toContain(new Date(now - 7 * 24 * HOUR).toISOString().slice(0, 16));
      const inside = await kept.inject({
        method: 'POST',
        url: `/webhook-endpoints/${id}/recover`,
        headers: { authorization: `Bearer ${KEY}` },
        payload: { since: new Date(now - 6 * 24 * HOUR).toISOString() },
      });
      expect(inside.statusCode).toBe(202);
    } finally {
      await kept.close();
    }
  });
});
