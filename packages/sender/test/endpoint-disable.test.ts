// @module-tag postgres
// @module-tag pglite
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { apiClient } from '../../../test/support/api-client.js';
import { type LoopbackReceiver, startLoopbackReceiver } from '../../../test/support/loopback-receiver.js';
import { HELD_UNTIL } from '../src/delivery/sql/held-deliveries.js';
import { checkFailingEndpoints } from '../src/endpoints/health.js';
import {
  buildApp,
  createDeliveryClient,
  createDeliveryWorker,
  type Database,
  type DeliveryWorkerOptions,
  loadConfig,
} from '../src/index.js';
import { manualClock } from './fixtures/clock.js';
import { createdEvent } from './fixtures/sessions.js';
import { openTestDatabase, testStorages } from './fixtures/storage.js';

const DAY = 86_400_000;
const HOUR = 3_600_000;
const RULE = { afterMs: 5 * DAY, minAttempts: 10 };

/** A logger that keeps what it is told at `warn`. */
function recordingLogger() {
  const warnings: { fields: Record<string, unknown>; message: string }[] = [];
  return {
    warnings,
    info() {},
    error() {},
    warn(fields: object, message?: string) {
      warnings.push({ fields: fields as Record<string, unknown>, message: message ?? '' });
    },
  };
}

describe.each(testStorages())('a failing endpoint on %s', { timeout: 120_000 }, (storage) => {
  let app: FastifyInstance;
  let base: string;
  let database: Database;
  let cleanup: () => Promise<void>;
  const KEY = `sk_test_failing_${storage}`;
  const OTHER = `sk_test_failing_other_${storage}`;
  const clock = manualClock();
  const receivers: LoopbackReceiver[] = [];
  const workers: { stop(): Promise<void> }[] = [];

  beforeAll(async () => {
    ({ database, cleanup } = await openTestDatabase(storage, 'failing'));
    app = await buildApp({
      database,
      config: loadConfig({
        PAYHOOK_API_KEYS: `${KEY}:biz-failing:test,${OTHER}:biz-failing-other:test`,
        PAYHOOK_ALLOW_PRIVATE_WEBHOOKS: '1',
      }),
      logger: false,
      now: clock.now,
    });
    base = await app.listen({ port: 0, host: '127.0.0.1' });
  }, 60_000);
  beforeEach(() => {
    // Each test from now (the last one left the clock days ahead), a second ahead of the
    // database's clock, which stamps new deliveries due: they are due on this one.
    clock.set(new Date(Date.now() + 1000));
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
    await Promise.all(receivers.splice(0).map((r) => r.close()));
  });
  afterAll(async () => {
    await app?.close();
    await cleanup?.();
  });

  const call = (method: string, path: string, body?: unknown, key = KEY) =>
    // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field below
    apiClient(() => base, key)<any>(method, path, body);

  function worker(options: Partial<DeliveryWorkerOptions> = {}) {
    const w = createDeliveryWorker({
      database,
      client: createDeliveryClient({ allowPrivate: true, totalTimeoutMs: 2000 }),
      now: clock.now,
      random: () => 0.5,
      ...options,
    });
    workers.push(w);
    return w;
  }

  /** A session of the business; its `payment.session.created` event id. */
  const makeEvent = (key = KEY) => createdEvent((method, path, body) => call(method, path, body, key));

  const deliveriesTo = (endpointId: string) =>
    database.db
      .selectFrom('deliveries')
      .select([
        'id',
        'event_id',
        'status',
        'attempts',
        'next_attempt_at',
        'first_attempt_at',
        'superseded_by',
      ])
      .where('endpoint_id', '=', endpointId)
      .orderBy('created_at')
      .execute();

  /** Runs the worker on the manual clock until nothing of `endpointId` is due before `until`. */
  async function runUntil(w: { runDue(): Promise<number> }, endpointId: string, until: number) {
    for (let i = 0; i < 100; i++) {
      await w.runDue();
      const { rows } = await sql<{ at: Date | null }>`select min(next_attempt_at) as at from deliveries
        where status = 'pending' and endpoint_id = ${endpointId}::uuid and next_attempt_at < ${HELD_UNTIL}`.execute(
        database.db,
      );
      const next = rows[0]?.at ? new Date(rows[0].at).getTime() : undefined;
      if (next === undefined || next > until) return;
      clock.set(new Date(Math.max(next, clock.now().getTime())));
    }
    throw new Error(
      `still due after 100 rounds at ${clock.now().toISOString()}: ${JSON.stringify(await deliveriesTo(endpointId))}`,
    );
  }

  it('warns at 50, 75 and 90 % of the period (log and GET), disables at its end, holds what is pending, and enabling resumes it with a fresh 48 hours', async () => {
    const receiver = await startLoopbackReceiver({ respond: 500 });
    receivers.push(receiver);
    const created = await call('POST', '/webhook-endpoints', { url: receiver.url });
    expect(created.status).toBe(201);
    const endpoint = created.body.data;
    expect(created.body.data.failure).toBeNull();
    const w = worker();
    const log = recordingLogger();

    // One event, every attempt refused for its 48 hours: 11 attempts, the run starts at the first.
    const first = await makeEvent();
    // Its delivery is due by the database's clock: the manual one is set past it (a busy machine
    // can take longer than a second to make the event).
    clock.set(new Date(Math.max(clock.now().getTime(), Date.now() + 1000)));
    const t0 = clock.now().getTime();
    await runUntil(w, endpoint.id, t0 + 3 * DAY);
    expect((await deliveriesTo(endpoint.id)).map((d) => d.status)).toEqual(['failed']);
    const view = (await call('GET', `/webhook-endpoints/${endpoint.id}`)).body.data;
    expect(view.status).toBe('enabled');
    expect(view.failure).toMatchObject({ failed_attempts: 11, warning: null });
    expect(new Date(view.failure.failing_since).getTime()).toBe(t0);
    expect(new Date(view.failure.disables_at).getTime()).toBe(t0 + 5 * DAY);

    // 50, 75, 90 %: each warned once in the log, and shown by GET.
    for (const [at, level] of [
      [2.5, 50],
      [3.75, 75],
      [4.5, 90],
    ] as const) {
      clock.set(new Date(t0 + at * DAY));
      const check = await checkFailingEndpoints(database, RULE, clock.now(), log);
      expect(check).toEqual({
        warned: [{ endpointId: endpoint.id, url: receiver.url, warning: level }],
        disabled: [],
      });
      // A second instance looking at the same moment says nothing more.
      expect((await checkFailingEndpoints(database, RULE, clock.now(), log)).warned).toEqual([]);
      const got = (await call('GET', `/webhook-endpoints/${endpoint.id}`)).body.data;
      expect(got.failure).toMatchObject({ warning: level, period_percent: Math.floor((at / 5) * 100) });
      expect((await call('GET', '/webhook-endpoints')).body.data[0].failure.warning).toBe(level);
    }
    expect(log.warnings.map((l) => l.fields.warning)).toEqual([50, 75, 90]);
    expect(log.warnings[0]?.message).toContain(`webhook endpoint ${receiver.url} is failing`);

    // A new event just before the end: attempted, failed, pending at the disable.
    clock.set(new Date(t0 + 4.9 * DAY));
    const pendingEvent = await makeEvent();
    await w.runDue();
    const [, kept] = await deliveriesTo(endpoint.id);
    expect(kept).toMatchObject({ event_id: pendingEvent, status: 'pending', attempts: 1 });
    const requestsBefore = receiver.received.length;

    clock.set(new Date(t0 + 5 * DAY));
    const disabled = await checkFailingEndpoints(database, RULE, clock.now(), log);
    expect(disabled.disabled).toEqual([{ endpointId: endpoint.id, url: receiver.url }]);
    expect(log.warnings.at(-1)?.message).toContain('disabled: every attempt failed for 5 days');
    const after = (await call('GET', `/webhook-endpoints/${endpoint.id}`)).body.data;
    expect(after).toMatchObject({ status: 'disabled', disabled_reason: 'failing' });

    // Disabled: nothing reaches the receiver, not its kept delivery, not a new event, not a
    // redelivery nor a recovery; the kept delivery stays pending (held), not failed, not deleted.
    const whileDisabled = await makeEvent();
    expect((await deliveriesTo(endpoint.id)).some((d) => d.event_id === whileDisabled)).toBe(false);
    const redelivered = await call('POST', `/events/${first}/redeliver`, {});
    expect(redelivered.status).toBe(409);
    // (Events are stamped by the database's clock, which the manual one is ahead of.)
    const recovered = await call('POST', `/webhook-endpoints/${endpoint.id}/recover`, {
      since: new Date(Date.now() - HOUR).toISOString(),
    });
    expect(recovered.status).toBe(202);
    // The failed first event and the one made while disabled; the kept one is left as it is.
    expect(recovered.body.data.queued).toBe(2);
    for (let i = 0; i < 3; i++) {
      clock.advance(12 * HOUR);
      await w.runDue();
    }
    expect(receiver.received.length).toBe(requestsBefore);
    const held = await deliveriesTo(endpoint.id);
    expect(
      held
        .filter((d) => d.status === 'pending')
        .map((d) => d.event_id)
        .sort(),
    ).toEqual([first, pendingEvent, whileDisabled].sort());
    for (const d of held.filter((d) => d.status === 'pending')) {
      expect(new Date(d.next_attempt_at).getTime()).toBe(HELD_UNTIL.getTime());
    }
    // The event's page does not promise a next attempt in the year 9999.
    const shown = (await call('GET', `/events/${pendingEvent}`)).body.data.deliveries;
    expect(shown.find((d: { status: string }) => d.status === 'pending').next_attempt_at).toBeNull();
    // Still disabled at the next look: the sweeper leaves a disabled endpoint alone.
    expect(await checkFailingEndpoints(database, RULE, clock.now(), log)).toEqual({
      warned: [],
      disabled: [],
    });

    // Enabled again: the run of failures is forgotten, the kept deliveries are due now, and their
    // 48 hours count from now (the attempted one keeps its attempt count).
    const enabledAt = clock.now().getTime();
    const enabled = await call('PATCH', `/webhook-endpoints/${endpoint.id}`, { status: 'enabled' });
    expect(enabled.status).toBe(200);
    expect(enabled.body.data).toMatchObject({ status: 'enabled', disabled_reason: null, failure: null });
    const resumed = (await deliveriesTo(endpoint.id)).filter((d) => d.status === 'pending');
    expect(resumed).toHaveLength(3);
    for (const d of resumed) {
      expect(new Date(d.next_attempt_at).getTime()).toBe(enabledAt);
      expect(d.first_attempt_at === null ? null : new Date(d.first_attempt_at).getTime()).toBe(
        d.attempts === 0 ? null : enabledAt,
      );
    }
    await runUntil(w, endpoint.id, enabledAt + 3 * DAY);
    const done = (await deliveriesTo(endpoint.id)).filter((d) => resumed.some((r) => r.id === d.id));
    expect(done.map((d) => d.status)).toEqual(['failed', 'failed', 'failed']);
    // The kept one's last attempt is at the fresh deadline, 48 hours after the enabling.
    const { rows } = await sql<{ last: Date }>`select max(started_at) as last from delivery_attempts
      where delivery_id = ${kept?.id}::uuid`.execute(database.db);
    expect(new Date(rows[0]?.last as Date).getTime()).toBe(enabledAt + 48 * HOUR);
    expect(receiver.received.length).toBeGreaterThan(requestsBefore);
  });

  it('needs the minimum of attempts; a delivered attempt ends the run; another business gets 404 on every route', async () => {
    let answer = 500;
    const receiver = await startLoopbackReceiver({ respond: () => answer });
    receivers.push(receiver);
    const endpoint = (await call('POST', '/webhook-endpoints', { url: receiver.url })).body.data;
    const w = worker();
    const log = recordingLogger();
    await makeEvent();
    clock.set(new Date(Math.max(clock.now().getTime(), Date.now() + 1000)));
    const t0 = clock.now().getTime();
    await w.runDue();
    // One attempt in five days: too few to disable.
    clock.set(new Date(t0 + 6 * DAY));
    const check = await checkFailingEndpoints(database, RULE, clock.now(), log);
    expect(check.disabled.map((d) => d.endpointId)).not.toContain(endpoint.id);
    expect((await call('GET', `/webhook-endpoints/${endpoint.id}`)).body.data).toMatchObject({
      status: 'enabled',
      failure: { failed_attempts: 1, warning: 90, period_percent: 100 },
    });
    // Another URL is another receiver: its run starts again.
    const moved = await call('PATCH', `/webhook-endpoints/${endpoint.id}`, {
      url: `${receiver.url}?moved`,
    });
    expect(moved.body.data.failure).toBeNull();
    await call('PATCH', `/webhook-endpoints/${endpoint.id}`, { url: receiver.url });
    clock.advance(1000);
    await makeEvent();
    await w.runDue();
    // The new event's first attempt and the first event's retry, both refused: a run of two.
    expect((await call('GET', `/webhook-endpoints/${endpoint.id}`)).body.data.failure).toMatchObject({
      failed_attempts: 2,
    });
    // One success, and the endpoint is no longer failing.
    answer = 200;
    await runUntil(w, endpoint.id, clock.now().getTime() + 3 * DAY);
    expect((await call('GET', `/webhook-endpoints/${endpoint.id}`)).body.data.failure).toBeNull();

    for (const [method, path, body] of [
      ['GET', `/webhook-endpoints/${endpoint.id}`, undefined],
      ['PATCH', `/webhook-endpoints/${endpoint.id}`, { status: 'enabled' }],
      ['POST', `/webhook-endpoints/${endpoint.id}/recover`, { since: new Date().toISOString() }],
      ['GET', `/webhook-endpoints/${endpoint.id}/stats`, undefined],
    ] as const) {
      const refused = await call(method, path, body, OTHER);
      expect(refused.status, `${method} ${path}`).toBe(404);
      expect(refused.body.error.code).toBe('not_found');
    }
  });

  it('a manually disabled endpoint is sent nothing, and enabling it sends what waited', async () => {
    const receiver = await startLoopbackReceiver({ respond: 200 });
    receivers.push(receiver);
    const endpoint = (await call('POST', '/webhook-endpoints', { url: receiver.url })).body.data;
    const w = worker();
    // A delivery waiting when the endpoint is disabled is held at once, still pending.
    const waiting = await makeEvent();
    const disabled = await call('PATCH', `/webhook-endpoints/${endpoint.id}`, { status: 'disabled' });
    expect(disabled.body.data).toMatchObject({ status: 'disabled', disabled_reason: 'manual' });
    const [held] = await deliveriesTo(endpoint.id);
    expect(held).toMatchObject({ event_id: waiting, status: 'pending', attempts: 0 });
    expect(new Date(held?.next_attempt_at as Date).getTime()).toBe(HELD_UNTIL.getTime());
    await makeEvent(); // no delivery: it was made while the endpoint was disabled
    const recovered = await call('POST', `/webhook-endpoints/${endpoint.id}/recover`, {
      since: new Date(Date.now() - HOUR).toISOString(),
    });
    // The waiting one (never attempted) and the one made while disabled.
    expect(recovered.body.data.queued).toBe(2);
    clock.set(new Date(Math.max(clock.now().getTime(), Date.now() + 1000)));
    await w.runDue();
    expect(receiver.received).toHaveLength(0);
    await call('PATCH', `/webhook-endpoints/${endpoint.id}`, { status: 'enabled' });
    await w.runDue();
    expect(receiver.received.length).toBe(recovered.body.data.queued);
    expect((await deliveriesTo(endpoint.id)).every((d) => d.status === 'delivered')).toBe(true);
  });
});
