// @module-tag postgres
// @module-tag pglite
import { verifyChecksum } from '@payhook/core';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { apiClient } from '../../../test/support/api-client.js';
import {
  type LoopbackReceiver,
  type LoopbackReceiverOptions,
  type Respond,
  startLoopbackReceiver,
} from '../../../test/support/loopback-receiver.js';
import {
  ATTEMPT_OUTCOMES,
  buildApp,
  createDeliveryClient,
  createDeliveryMetrics,
  createDeliveryWorker,
  type Database,
  type DeliveryMetrics,
  type DeliveryWorkerOptions,
  loadConfig,
  retrySchedule,
} from '../src/index.js';
import { manualClock, seededRandom } from './fixtures/clock.js';
import { sessionRequest as session } from './fixtures/requests.js';
import { openTestDatabase, testStorages } from './fixtures/storage.js';

describe.each(testStorages())('event delivery on %s', { timeout: 60_000 }, (storage) => {
  let app: FastifyInstance;
  let base: string;
  let database: Database;
  let cleanup: () => Promise<void>;
  let metrics: DeliveryMetrics;
  const BIZ = `biz-delivery-${storage}`;
  const KEY = `sk_test_delivery_${storage}`;
  const receivers: LoopbackReceiver[] = [];
  const workers: { stop(): Promise<void> }[] = [];

  // Opening PGlite and migrating takes a few seconds on a busy machine.
  beforeAll(async () => {
    ({ database, cleanup } = await openTestDatabase(storage, 'delivery'));
    metrics = createDeliveryMetrics(database);
    app = await buildApp({
      database,
      metrics,
      // Receivers of these tests listen on loopback: the development switch lets them register.
      config: loadConfig({ PAYHOOK_API_KEYS: `${KEY}:${BIZ}:test`, PAYHOOK_ALLOW_PRIVATE_WEBHOOKS: '1' }),
      logger: false,
    });
    base = await app.listen({ port: 0, host: '127.0.0.1' });
  }, 60_000);
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
    await Promise.all(receivers.splice(0).map((r) => r.close()));
    // Each test starts with an empty queue: what an earlier test left pending is not its business.
    // It ends failed, its events marked as a failure marks them (`failed_delivery`).
    await sql`with d as (update deliveries set status = 'failed' where status = 'pending' returning event_id)
      update events set failed_delivery = true where id in (select event_id from d)`.execute(database.db);
  });
  afterAll(async () => {
    await app?.close();
    await cleanup?.();
  });

  const api = apiClient(() => base, KEY);
  const call = (method: string, path: string, body?: unknown) =>
    // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field below
    api<any>(method, path, body);

  async function receiver(respond: Respond = 200, options: LoopbackReceiverOptions = {}) {
    const r = await startLoopbackReceiver({ ...options, respond });
    receivers.push(r);
    return r;
  }

  function worker(options: Partial<DeliveryWorkerOptions> = {}) {
    const w = createDeliveryWorker({
      database,
      metrics,
      client: createDeliveryClient({ allowPrivate: true, totalTimeoutMs: 2000 }),
      ...options,
    });
    workers.push(w);
    return w;
  }

  /**
   * A worker with 4 attempts in flight, 2 per URL (so it holds at most 8 rows of one URL), that
   * looks for work only when woken, lets a hanging attempt run 30 s and stops without waiting.
   */
  function twoPerUrlWorker() {
    return worker({
      concurrency: 4,
      perUrlConcurrency: 2,
      pollIntervalMs: 3_600_000,
      shutdownGraceMs: 50,
      client: createDeliveryClient({ allowPrivate: true, totalTimeoutMs: 30_000 }),
    });
  }

  async function register(...urls: string[]) {
    expect((await call('PATCH', '/accounts/settings', { webhook_urls: urls })).status).toBe(200);
  }

  /** Creates a session (its payment.session.created event) and returns the payment id. */
  async function createSession(): Promise<string> {
    const res = await call('POST', '/payment-sessions', session);
    expect(res.status).toBe(201);
    return res.body.data.payment.id;
  }

  async function deliveriesOf(paymentId: string) {
    return database.db
      .selectFrom('deliveries as d')
      .innerJoin('events as e', 'e.id', 'd.event_id')
      .select(['d.id', 'd.url', 'd.status', 'd.attempts', 'd.next_attempt_at', 'd.claim_token', 'e.payload'])
      .where('e.payment_id', '=', paymentId)
      .orderBy('d.url')
      .execute();
  }

  async function attemptsOf(deliveryId: string) {
    return database.db
      .selectFrom('delivery_attempts')
      .selectAll()
      .where('delivery_id', '=', deliveryId)
      .orderBy('attempt')
      .execute();
  }

  /** Runs a worker on a manual clock until no delivery is pending: the whole 48 hours if need be. */
  async function runOut(w: { runDue(): Promise<number> }, clock: ReturnType<typeof manualClock>) {
    for (let i = 0; i < 100; i++) {
      await w.runDue();
      const next = await database.db
        .selectFrom('deliveries')
        .select((eb) => eb.fn.min('next_attempt_at').as('at'))
        .where('status', '=', 'pending')
        .executeTakeFirst();
      if (!next?.at) return;
      clock.set(new Date(next.at));
    }
    throw new Error('deliveries still pending after 100 rounds');
  }

  it('sends each event to every registered URL, the stored bytes exactly, verifiable by the receiver', async () => {
    const a = await receiver(200);
    const b = await receiver(200);
    const c = await receiver(200);
    await register(a.url, b.url, c.url);
    const payment = await createSession();
    expect(await worker().runDue()).toBe(3);

    const rows = await deliveriesOf(payment);
    expect(rows.map((r) => r.status)).toEqual(['delivered', 'delivered', 'delivered']);
    for (const r of [a, b, c]) {
      expect(r.received).toHaveLength(1);
      const got = r.received[0];
      expect(got?.body).toBe(rows[0]?.payload);
      expect(got?.headers['content-type']).toBe('application/json');
      expect(got?.headers['payhook-event-id']).toMatch(/^[0-9a-f-]{36}$/);
      expect(got?.headers['payhook-attempt']).toBe('1');
      const verified = verifyChecksum({ rawBody: got?.body as string }, { businessIds: [BIZ] });
      expect(verified).toMatchObject({ ok: true, event: 'payment.session.created', businessId: BIZ });
    }
    const attempts = await attemptsOf(rows[0]?.id as string);
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({ attempt: 1, status_code: 200, error_code: null });
    expect(attempts[0]?.response_body).toBe('answered 200');
  });

  it('keeps each URL independent: a 500 is retried on schedule and delivered next time, the others once', async () => {
    const clock = manualClock();
    const flaky = await receiver((_, n) => (n === 1 ? 500 : 200));
    const fine = await receiver(200);
    await register(flaky.url, fine.url);
    const payment = await createSession();
    const w = worker({ now: clock.now, random: () => 0.5 });
    expect(await w.runDue()).toBe(2);
    let rows = await deliveriesOf(payment);
    const flakyRow = rows.find((r) => r.url === flaky.url);
    expect(flakyRow).toMatchObject({ status: 'pending', attempts: 1 });
    // 5 s after the first attempt (jitter factor 1 with random 0.5), not before.
    expect(new Date(flakyRow?.next_attempt_at as Date).getTime()).toBe(clock.now().getTime() + 5000);
    expect(rows.find((r) => r.url === fine.url)).toMatchObject({ status: 'delivered', attempts: 1 });
    clock.advance(4999);
    expect(await w.runDue()).toBe(0);
    clock.advance(1);
    expect(await w.runDue()).toBe(1);
    rows = await deliveriesOf(payment);
    expect(rows.map((r) => [r.status, r.attempts])).toEqual(
      rows.map((r) => (r.url === flaky.url ? ['delivered', 2] : ['delivered', 1])),
    );
    expect(flaky.received.map((r) => r.headers['payhook-attempt'])).toEqual(['1', '2']);
    expect(flaky.received[0]?.body).toBe(flaky.received[1]?.body);
    expect(fine.received).toHaveLength(1);
    const attempts = await attemptsOf(flakyRow?.id as string);
    expect(attempts.map((a) => [a.status_code, a.error_code])).toEqual([
      [500, 'unexpected_status'],
      [200, null],
    ]);
  });

  it("honours a receiver's Retry-After on 503 and 429: no earlier than asked, never past the deadline", async () => {
    const clock = manualClock();
    const busy = await receiver({ status: 503, headers: { 'retry-after': '120' } });
    const limited = await receiver({ status: 429, headers: { 'retry-after': String(72 * 3600) } });
    const broken = await receiver({ status: 500, headers: { 'retry-after': '120' } });
    await register(busy.url, limited.url, broken.url);
    const payment = await createSession();
    const w = worker({ now: clock.now, random: () => 0.5 });
    const first = clock.now().getTime();
    expect(await w.runDue()).toBe(3);
    const rows = await deliveriesOf(payment);
    const rowOf = (url: string) => rows.find((r) => r.url === url);
    const due = (url: string) => new Date(rowOf(url)?.next_attempt_at as Date).getTime();
    const [answered] = await attemptsOf(rowOf(busy.url)?.id as string);
    // 120 s after the answer came (the attempt's start plus its latency, on the worker's clock),
    // not the schedule's 5 s; the attempt's message says what the receiver asked.
    expect(new Date(answered?.started_at as Date).getTime()).toBe(first);
    expect(due(busy.url)).toBe(first + (answered?.latency_ms as number) + 120_000);
    expect(answered).toMatchObject({ status_code: 503, error_code: 'unexpected_status' });
    expect(answered?.error_message).toContain('(Retry-After: 120 s)');
    // 72 hours asked: the last attempt is at the deadline, 48 hours after the first.
    expect(due(limited.url)).toBe(first + 48 * 3600_000);
    // A 500's Retry-After is not read: the schedule's 5 s (jitter factor 1).
    expect(due(broken.url)).toBe(first + 5000);

    clock.advance(119_000);
    expect(await w.runDue()).toBe(1);
    expect([busy.received.length, broken.received.length]).toEqual([1, 2]);
    clock.set(new Date(due(busy.url)));
    expect(await w.runDue()).toBe(1);
    expect(busy.received.map((r) => r.headers['payhook-attempt'])).toEqual(['1', '2']);
    expect(limited.received).toHaveLength(1);
  });

  it('says why a receiver refuses: a 401 invalid_checksum names the business id, once a minute per URL', async () => {
    const refusing = await receiver({
      status: 401,
      headers: { 'content-type': 'application/json' },
      // What a payhook receiver configured with another business id answers.
      body: '{"error":{"code":"invalid_checksum","message":"The checksum matches none of the configured business ids."}}',
    });
    await register(refusing.url);
    await createSession();
    await createSession();
    const warnings: { fields: object; msg: string | undefined }[] = [];
    const logger = {
      info() {},
      error() {},
      warn: (fields: object, msg?: string) => warnings.push({ fields, msg }),
    };
    expect(await worker({ logger }).runDue()).toBe(2);
    expect(warnings).toEqual([
      {
        fields: expect.objectContaining({ url: refusing.url, status: 401 }),
        msg: `${refusing.url}: checksum refused: is the receiver using business id ${BIZ}?`,
      },
    ]);
  });

  it('counts 201, 204, 3xx, timeouts and refused connections as failed attempts', async () => {
    const created = await receiver(201);
    const noContent = await receiver(204);
    const redirect = await receiver(302);
    const hang = await receiver('hang');
    const gone = await receiver(200);
    await gone.close();
    receivers.splice(receivers.indexOf(gone), 1);
    await register(created.url, noContent.url, redirect.url, hang.url, gone.url);
    const payment = await createSession();
    const w = worker({ client: createDeliveryClient({ allowPrivate: true, totalTimeoutMs: 300 }) });
    expect(await w.runDue()).toBe(5);
    const rows = await deliveriesOf(payment);
    const codes: Record<string, unknown> = {};
    for (const row of rows) {
      expect(row).toMatchObject({ status: 'pending', attempts: 1, claim_token: null });
      const [attempt] = await attemptsOf(row.id);
      codes[row.url] = [attempt?.status_code, attempt?.error_code];
    }
    expect(codes).toEqual({
      [created.url]: [201, 'unexpected_status'],
      [noContent.url]: [204, 'unexpected_status'],
      [redirect.url]: [302, 'redirect'],
      [hang.url]: [null, 'timeout'],
      [gone.url]: [null, 'connection_refused'],
    });
  });

  it('records an answer whose body holds NUL bytes (PostgreSQL text cannot), and delivers the rest of the batch', async () => {
    const binary = await receiver({ status: 500, body: Buffer.from([0x61, 0x00, 0x62]) }, { path: '/' });
    const fine = await receiver(200);
    await register(binary.url, fine.url);
    const payment = await createSession();
    expect(await worker().runDue()).toBe(2);
    const rows = await deliveriesOf(payment);
    const bad = rows.find((r) => r.url === binary.url);
    expect(bad).toMatchObject({ status: 'pending', attempts: 1, claim_token: null });
    expect((await attemptsOf(bad?.id as string))[0]).toMatchObject({
      status_code: 500,
      response_body: 'ab',
    });
    expect(rows.find((r) => r.url === fine.url)).toMatchObject({ status: 'delivered' });
  });

  it('retries for 48 hours on the schedule, at exactly the computed times, then marks the delivery failed', async () => {
    const clock = manualClock();
    const down = await receiver(500);
    await register(down.url);
    const payment = await createSession();
    const w = worker({ now: clock.now, random: seededRandom(42) });
    const first = clock.now();
    await runOut(w, clock);
    const [row] = await deliveriesOf(payment);
    expect(row).toMatchObject({ status: 'failed', attempts: 11 });
    const attempts = await attemptsOf(row?.id as string);
    const expected = retrySchedule(first, seededRandom(42));
    expect(attempts.map((a) => new Date(a.started_at).toISOString())).toEqual(
      expected.map((d) => d.toISOString()),
    );
    expect(new Date(attempts.at(-1)?.started_at as Date).getTime() - first.getTime()).toBe(48 * 3600_000);
    // Past the deadline nothing is attempted again.
    clock.advance(30 * 24 * 3600_000);
    expect(await w.runDue()).toBe(0);
    expect(down.received).toHaveLength(11);
    const event = await call('GET', `/events?payment_id=${payment}`);
    expect(event.body.data[0].delivery_status).toBe('failed');
  });

  it('delivers a new event at once with the polling interval set to hours (the wake-up works)', async () => {
    const r = await receiver(200);
    await register(r.url);
    const w = worker({ pollIntervalMs: 3_600_000 });
    await w.start();
    // Let the start-up pass find nothing, so only a wake-up can deliver what comes next.
    await new Promise((resolve) => setTimeout(resolve, 50));
    await createSession();
    await r.waitFor(1);
    expect(r.received).toHaveLength(1);
  });

  it('does not let a URL that hangs hold back another URL (per-URL limit)', async () => {
    const slow = await receiver('hang');
    const fast = await receiver(200);
    await register(slow.url, fast.url);
    const w = twoPerUrlWorker();
    await w.start();
    const payments: string[] = [];
    for (let i = 0; i < 6; i++) payments.push(await createSession());
    await fast.waitFor(6);
    expect(fast.received).toHaveLength(6);
    expect(slow.inFlight()).toBe(2);
    // Stopping releases the claims of the attempts that cannot finish: none stays claimed.
    await w.stop();
    const rows = (await Promise.all(payments.map(deliveriesOf))).flat();
    expect(rows.filter((r) => r.claim_token !== null)).toEqual([]);
    expect(rows.filter((r) => r.url === slow.url).map((r) => r.status)).toEqual(Array(6).fill('pending'));
  });

  it('a stop past its grace cuts the attempts it gave back, records none of them, and touches the database no more', async () => {
    const slow = await receiver('hang');
    await register(slow.url);
    const payments = [await createSession(), await createSession()];
    const logged: unknown[] = [];
    const note = (obj: unknown) => void logged.push(obj);
    // Its own HTTP client (none given), as `payhook serve` runs it: the stop cuts its connections.
    const w = worker({
      client: undefined,
      allowPrivate: true,
      shutdownGraceMs: 50,
      logger: { info() {}, warn() {}, error: note },
    });
    await w.start();
    await vi.waitFor(() => expect(slow.inFlight()).toBe(2), { timeout: 10_000, interval: 20 });
    const queries: string[] = [];
    await w.stop();
    // Once stop() resolves the database may close: from here, no statement is the worker's.
    const spy = vi.spyOn(database, 'delivery').mockImplementation(async () => {
      queries.push('delivery');
      throw new Error('the database is closed');
    });
    try {
      await vi.waitFor(() => expect(slow.inFlight()).toBe(0), { timeout: 5_000, interval: 20 });
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(queries).toEqual([]);
      expect(logged).toEqual([]);
    } finally {
      spy.mockRestore();
    }
    const rows = (await Promise.all(payments.map(deliveriesOf))).flat();
    expect(rows.map((r) => [r.status, r.attempts, r.claim_token])).toEqual(
      Array(2).fill(['pending', 0, null]),
    );
    for (const r of rows) expect(await attemptsOf(r.id)).toEqual([]);
  });

  it('from idle, claims what starts every slot first, and the rest of its room while those are sent', async () => {
    const fast = await receiver(200);
    await register(fast.url);
    for (let i = 0; i < 24; i++) await createSession();
    // Four slots, room for 16 rows held: the first claim takes 4, not 16.
    const w = worker({ concurrency: 4, perUrlConcurrency: 4 });
    const original = database.delivery.bind(database);
    const claims: { rows: number; received: number }[] = [];
    const spy = vi.spyOn(database, 'delivery').mockImplementation(async (fn) => {
      const result = await original(fn);
      if (result && typeof result === 'object' && 'claims' in result)
        claims.push({ rows: (result.claims as unknown[]).length, received: fast.received.length });
      return result;
    });
    try {
      expect(await w.runDue()).toBe(24);
    } finally {
      spy.mockRestore();
    }
    expect(claims[0]).toEqual({ rows: 4, received: 0 });
    // The next claim, made as soon as those 4 began, filled the room behind them: 12 more.
    expect(claims[1]?.rows).toBe(12);
    expect(claims.reduce((n, c) => n + c.rows, 0)).toBe(24);
    expect(new Set(fast.received.map((r) => r.body)).size).toBe(24);
  });

  it('claims no more of a backlog than its URL may hold; the rest wait, unclaimed and unattempted', async () => {
    const slow = await receiver('hang');
    await register(slow.url);
    const payments: string[] = [];
    for (let i = 0; i < 24; i++) payments.push(await createSession());
    const before = new Map((await Promise.all(payments.map(deliveriesOf))).flat().map((r) => [r.id, r]));
    // Two in flight and six ready at most for the URL, in a worker with room for sixteen.
    const w = twoPerUrlWorker();
    await w.start();
    const held = await vi.waitFor(
      async () => {
        const rows = (await Promise.all(payments.map(deliveriesOf))).flat().filter((r) => r.claim_token);
        expect(rows).toHaveLength(8);
        expect(slow.inFlight()).toBe(2);
        return new Set(rows.map((r) => r.id));
      },
      { timeout: 10_000, interval: 20 },
    );
    await w.stop();
    // A claim that took rows beyond the URL's room would have given them back. The rest may have
    // been paced (moved to their turn, later), never brought forward.
    const waiting = (await Promise.all(payments.map(deliveriesOf))).flat().filter((r) => !held.has(r.id));
    expect(waiting).toHaveLength(16);
    for (const r of waiting) {
      expect([r.status, r.attempts, r.claim_token]).toEqual(['pending', 0, null]);
      const due = new Date(before.get(r.id)?.next_attempt_at as Date).getTime();
      expect(new Date(r.next_attempt_at).getTime()).toBeGreaterThanOrEqual(due);
    }
  });

  it('raises the /metrics counters by exactly the attempts made', async () => {
    const scrape = async () => {
      const text = await (await fetch(`${base}/metrics`)).text();
      const value = (outcome: string) =>
        Number(
          new RegExp(`^payhook_delivery_attempts_total\\{outcome="${outcome}"\\} (\\d+)$`, 'm').exec(
            text,
          )?.[1] ?? 0,
        );
      const count = (name: string) => Number(new RegExp(`^${name}_count (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
      const all = [...text.matchAll(/^payhook_delivery_attempts_total\{outcome="[^"]+"\} (\d+)$/gm)];
      return {
        text,
        attempts: all.reduce((sum, m) => sum + Number(m[1]), 0),
        delivered: value('delivered'),
        failed: value('http_5xx'),
        toAttempt: count('payhook_delivery_event_to_attempt_seconds'),
        toDelivered: count('payhook_delivery_event_to_delivered_seconds'),
      };
    };
    const before = await scrape();
    const ok = await receiver(200);
    const bad = await receiver(503);
    await register(ok.url, bad.url);
    await createSession();
    await createSession();
    await worker().runDue();
    const after = await scrape();
    expect(after.delivered - before.delivered).toBe(2);
    expect(after.failed - before.failed).toBe(2);
    // From each event's creation: to every attempt's start (an earlier test's attempts, cut by
    // its worker's stop, may be counted meanwhile), and to each delivery's 200.
    expect(after.toAttempt - before.toAttempt).toBe(after.attempts - before.attempts);
    expect(after.attempts - before.attempts).toBeGreaterThanOrEqual(4);
    expect(after.toDelivered - before.toDelivered).toBe(2);
    // The outcome label is one of a fixed set, each series there from the start.
    const outcomes = [...after.text.matchAll(/^payhook_delivery_attempts_total\{outcome="([^"]+)"\}/gm)];
    expect(outcomes.map((m) => m[1]).sort()).toEqual([...ATTEMPT_OUTCOMES].sort());
    expect(after.text).toMatch(/^payhook_delivery_attempts_total\{outcome="tls"\} 0$/m);
    expect(after.text).toMatch(/^payhook_delivery_event_to_delivered_seconds_bucket\{le="172800"\} \d+$/m);
    expect(after.text).toMatch(/^payhook_deliveries_pending 2$/m);
    expect(after.text).toMatch(/^payhook_oldest_due_delivery_age_seconds \d/m);
    expect(after.text).toContain('payhook_delivery_attempt_duration_seconds_bucket');
  });

  it('shares the work between two workers on one database without sending anything twice', async () => {
    const r = await receiver(200);
    await register(r.url);
    const payments: string[] = [];
    for (let i = 0; i < 30; i++) payments.push(await createSession());
    const one = worker({ concurrency: 3 });
    const two = worker({ concurrency: 3 });
    const made = await Promise.all([one.runDue(), two.runDue()]);
    expect(made[0] + made[1]).toBe(30);
    const ids = r.received.map((x) => x.headers['payhook-delivery-id']);
    expect(new Set(ids).size).toBe(30);
    expect(ids).toHaveLength(30);
  });

  it('lists events with filters, shows deliveries with attempts, and redelivers failures since a time once', async () => {
    const clock = manualClock();
    const down = await receiver(500);
    await register(down.url);
    const early = await createSession();
    await new Promise((resolve) => setTimeout(resolve, 20));
    const since = new Date();
    await new Promise((resolve) => setTimeout(resolve, 20));
    const late = [await createSession(), await createSession()];
    const w = worker({ now: clock.now, random: () => 0 });
    // Run the 48 hours out: every delivery fails for good.
    await runOut(w, clock);
    for (const p of [early, ...late]) {
      expect((await deliveriesOf(p)).map((r) => r.status)).toEqual(['failed']);
    }

    const failed = await call('GET', '/events?delivery_status=failed&type=payment.session.created&limit=100');
    const failedPayments = failed.body.data.map((e: { payment_id: string }) => e.payment_id);
    expect(failedPayments).toEqual(expect.arrayContaining([early, ...late]));
    expect((await call('GET', '/events?type=payment.session.failed&limit=100')).body.data).toEqual([]);
    expect((await call('GET', '/events?delivery_status=bogus')).status).toBe(400);

    const detail = await call('GET', `/events/${failed.body.data[0].id}`);
    expect(detail.status).toBe(200);
    expect(detail.body.data.deliveries[0]).toMatchObject({
      url: down.url,
      status: 'failed',
      attempt_count: 11,
    });
    expect(detail.body.data.deliveries[0].attempts).toHaveLength(11);
    expect(detail.body.data.deliveries[0].attempts[0]).toMatchObject({
      attempt: 1,
      status_code: 500,
      error: { code: 'unexpected_status' },
    });
    // Every timestamp in one format: ISO 8601 UTC with microseconds, as the spec gives expires_at.
    const stamps = JSON.stringify(detail.body).match(/"\d{4}-\d\d-\d\dT[^"]+"/g) ?? [];
    expect(stamps.length).toBeGreaterThan(3);
    for (const stamp of stamps) expect(stamp).toMatch(/^"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"$/);
    expect((await call('GET', '/events/00000000-0000-4000-8000-000000000000')).status).toBe(404);
    expect((await call('GET', '/events/not-an-id')).status).toBe(404);

    expect((await call('POST', '/events/redeliver', { since: 'yesterday' })).status).toBe(422);
    const bulk = await call('POST', '/events/redeliver', { since: since.toISOString() });
    expect({ status: bulk.status, body: bulk.body }).toEqual({
      status: 202,
      body: { data: { redelivered: 2 } },
    });
    // The same request again finds nothing: those failures were redelivered already.
    expect(
      (await call('POST', '/events/redeliver', { since: since.toISOString() })).body.data.redelivered,
    ).toBe(0);
    for (const p of late) {
      expect((await deliveriesOf(p)).map((r) => r.status).sort()).toEqual(['failed', 'pending']);
    }
    expect((await deliveriesOf(early)).map((r) => r.status)).toEqual(['failed']);
    const pending = await call('GET', '/events?delivery_status=pending&limit=100');
    expect(pending.body.data.map((e: { payment_id: string }) => e.payment_id).sort()).toEqual(
      [...late].sort(),
    );
    // Each status filter lists the events the whole list gives that status, in its order, one a
    // page, forward and back.
    const all: { id: string; delivery_status: string }[] = [];
    for (let after = ''; ; ) {
      const page = (await call('GET', `/events?limit=100${after ? `&after=${after}` : ''}`)).body;
      all.push(...page.data);
      after = page.pagination.after;
      if (!after) break;
    }
    for (const status of ['pending', 'failed', 'delivered', 'none']) {
      const walk = async (cursor: 'after' | 'before', from = '') => {
        const ids: string[] = [];
        let page: { data: { id: string }[]; pagination: Record<string, string> };
        let at = from;
        do {
          const query = `/events?delivery_status=${status}&limit=1${at ? `&${cursor}=${at}` : ''}`;
          page = (await call('GET', query)).body;
          ids.push(...page.data.map((e) => e.id));
          at = page.pagination[cursor] as string;
        } while (at);
        return { ids, last: page.pagination };
      };
      const forward = await walk('after');
      expect(forward.ids, status).toEqual(all.filter((e) => e.delivery_status === status).map((e) => e.id));
      const back = forward.ids.length > 1 ? await walk('before', forward.last.before) : { ids: [] };
      expect(back.ids.reverse(), status).toEqual(forward.ids.slice(0, -1));
    }

    // A manual redelivery of one event: a new delivery with its own 48 hours, delivered now.
    down.respond(200);
    const earlyEvent = failed.body.data.find((e: { payment_id: string }) => e.payment_id === early);
    const one = await call('POST', `/events/${earlyEvent.id}/redeliver`);
    expect(one.status).toBe(202);
    expect(one.body.data.deliveries).toEqual([{ id: expect.any(String), url: down.url }]);
    await w.runDue();
    const after = await call('GET', `/events/${earlyEvent.id}`);
    expect(after.body.data.delivery_status).toBe('delivered');
    expect(after.body.data.deliveries.map((d: { status: string }) => d.status).sort()).toEqual([
      'delivered',
      'failed',
    ]);
  });
});
