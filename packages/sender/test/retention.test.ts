// @module-tag postgres
// @module-tag pglite
import { randomUUID } from 'node:crypto';
import { type KyselyPlugin, sql } from 'kysely';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type LoopbackReceiver, startLoopbackReceiver } from '../../../test/support/loopback-receiver.js';
import { HISTOGRAM_BUCKETS } from '../src/db/attempt-hours.js';
import { createMaintenance } from '../src/db/maintenance.js';
import { createRetention, type RetentionReport, retentionHorizon } from '../src/delivery/retention.js';
import { HELD_UNTIL } from '../src/delivery/sql/held-deliveries.js';
import {
  buildApp,
  createDeliveryClient,
  createDeliveryWorker,
  type Database,
  loadConfig,
  startSender,
} from '../src/index.js';
import { manualClock } from './fixtures/clock.js';
import { getPage, signIn, startDashboardSender } from './fixtures/dashboard.js';
import { queueDeliveries } from './fixtures/deliveries.js';
import { holdingStatements } from './fixtures/held-statement.js';
import { openTestDatabase, TEST_DATABASE_URL, testStorages } from './fixtures/storage.js';

const DAY = 86_400_000;
const HOUR = 3_600_000;
const BUSINESS = 'biz-retention';

/** A delivery to seed, as the sender's statements leave one (times relative to the clock's now). */
interface SeedDelivery {
  status: 'pending' | 'delivered' | 'failed';
  createdAgo: number;
  /** For a finished one: how long ago it finished. */
  finishedAgo?: number;
  attempts?: number;
  /** Held while its endpoint is disabled (pending, due at HELD_UNTIL). */
  held?: boolean;
}

/**
 * Writes an event created `createdAgo` ms before `now` and its deliveries (each with its attempts),
 * shaped as the outbox, the worker's record statement and a redelivery leave them: a failed
 * delivery followed by another is superseded by it. Returns the ids.
 */
async function seedEvent(
  database: Database,
  now: Date,
  createdAgo: number,
  deliveries: SeedDelivery[] = [],
  paymentId: string | null = null,
): Promise<{ event: string; deliveries: string[] }> {
  const at = (ago: number) => new Date(now.getTime() - ago);
  const event = randomUUID();
  await database.db
    .insertInto('events')
    .values({
      id: event,
      business_id: BUSINESS,
      mode: 'test',
      type: 'payment.session.succeeded',
      payment_id: paymentId,
      payload: '{"event":"payment.session.succeeded","data":{},"checksum":"x"}',
      created_at: at(createdAgo),
    })
    .execute();
  const ids: string[] = [];
  for (const d of deliveries) {
    const attempts = d.attempts ?? (d.status === 'pending' ? 0 : 1);
    const row = await database.db
      .insertInto('deliveries')
      .values({
        event_id: event,
        url: 'https://merchant.example/webhooks',
        status: d.status,
        attempts,
        created_at: at(d.createdAgo),
        next_attempt_at: d.held ? HELD_UNTIL : at(d.finishedAgo ?? d.createdAgo),
        finished_at: d.finishedAgo === undefined ? null : at(d.finishedAgo),
        first_attempt_at: attempts > 0 ? at(d.createdAgo) : null,
        last_attempt_at: attempts > 0 ? at(d.finishedAgo ?? d.createdAgo) : null,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    if (ids.length > 0) {
      await database.db
        .updateTable('deliveries')
        .set({ superseded_by: row.id })
        .where('id', '=', ids.at(-1) as string)
        .where('status', '=', 'failed')
        .execute();
    }
    for (let n = 1; n <= attempts; n++) {
      await database.db
        .insertInto('delivery_attempts')
        .values({
          delivery_id: row.id,
          attempt: n,
          url: 'https://merchant.example/webhooks',
          started_at: at(d.createdAgo - n * 1000),
          latency_ms: 12,
          status_code: n === attempts && d.status === 'delivered' ? 200 : 503,
          response_body: 'ok',
          error_code: null,
          error_message: null,
        })
        .execute();
    }
    ids.push(row.id);
  }
  return { event, deliveries: ids };
}

async function ids(database: Database, table: 'events' | 'deliveries'): Promise<string[]> {
  return (await database.db.selectFrom(table).select('id').execute()).map((r) => r.id).sort();
}

async function attemptsOf(database: Database, deliveryIds: string[]): Promise<number> {
  if (deliveryIds.length === 0) return 0;
  const row = await database.db
    .selectFrom('delivery_attempts')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('delivery_id', 'in', deliveryIds)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

const removed = (report: RetentionReport) => report.removed;

describe.each(testStorages())('retention on %s', { timeout: 60_000 }, (storage) => {
  let database: Database;
  let cleanup: () => Promise<void>;
  let receiver: LoopbackReceiver;

  beforeAll(async () => {
    ({ database, cleanup } = await openTestDatabase(storage, 'retention'));
    receiver = await startLoopbackReceiver({ respond: 200 });
  }, 60_000);
  afterAll(async () => {
    await receiver?.close();
    await cleanup?.();
  });
  beforeEach(async () => {
    for (const table of [
      'delivery_attempts',
      'deliveries',
      'events',
      'payments',
      'endpoint_attempt_hours',
      'idempotency_keys',
      'dashboard_sessions',
    ] as const)
      await database.db.deleteFrom(table).execute();
  });

  it('removes the old finished events with their deliveries and attempts, and keeps what is pending, recent or referenced', async () => {
    const clock = manualClock(new Date());
    const now = clock.now();
    const payment = randomUUID();
    await sql`insert into payments (id, business_id, mode, reference, status, data, expires_at, created_at)
      values (${payment}, ${BUSINESS}, 'test', 'ref-1', 'settled', '{}', ${now}, ${new Date(now.getTime() - 41 * DAY)})`.execute(
      database.db,
    );
    const gone = [
      // Delivered at its second attempt, 40 days ago; its payment stays.
      await seedEvent(
        database,
        now,
        40 * DAY,
        [{ status: 'delivered', createdAgo: 40 * DAY, finishedAgo: 40 * DAY - HOUR, attempts: 2 }],
        payment,
      ),
      // Failed, then redelivered and delivered, all over 30 days ago.
      await seedEvent(database, now, 35 * DAY, [
        { status: 'failed', createdAgo: 35 * DAY, finishedAgo: 33 * DAY, attempts: 2 },
        { status: 'delivered', createdAgo: 32 * DAY, finishedAgo: 32 * DAY },
      ]),
      // No webhook URL took it: no delivery at all.
      await seedEvent(database, now, 31 * DAY),
    ];
    const kept = [
      // Redelivered an hour ago: pending inside its 48 hours, so the whole event stays.
      await seedEvent(database, now, 40 * DAY, [
        { status: 'failed', createdAgo: 40 * DAY, finishedAgo: 38 * DAY, attempts: 3 },
        { status: 'pending', createdAgo: HOUR, attempts: 1 },
      ]),
      // Held for 60 days while its endpoint is disabled: pending still.
      await seedEvent(database, now, 60 * DAY, [
        { status: 'delivered', createdAgo: 60 * DAY, finishedAgo: 60 * DAY },
        { status: 'pending', createdAgo: 60 * DAY, held: true },
      ]),
      // Made 45 days ago, finished 2 days ago (held, then resumed): finished inside the horizon.
      await seedEvent(database, now, 45 * DAY, [
        { status: 'delivered', createdAgo: 45 * DAY, finishedAgo: 2 * DAY, attempts: 1 },
      ]),
      // Recent.
      await seedEvent(database, now, 29 * DAY, [
        { status: 'delivered', createdAgo: 29 * DAY, finishedAgo: 29 * DAY },
      ]),
    ];
    // Idempotency keys are kept 48 hours, sessions until they expire.
    await database.db
      .insertInto('idempotency_keys')
      .values([
        {
          business_id: BUSINESS,
          mode: 'test',
          key: 'old',
          request_hash: 'h',
          created_at: new Date(now.getTime() - 3 * DAY),
        },
        {
          business_id: BUSINESS,
          mode: 'test',
          key: 'new',
          request_hash: 'h',
          created_at: new Date(now.getTime() - HOUR),
        },
      ])
      .execute();
    await database.db
      .insertInto('dashboard_sessions')
      .values(
        [-60_000, HOUR].map((ahead, i) => ({
          id_hash: `session-${i}`,
          key_hash: 'k',
          business_id: BUSINESS,
          mode: 'test' as const,
          csrf_token: 't',
          expires_at: new Date(now.getTime() + ahead),
        })),
      )
      .execute();
    // An endpoint's hourly counts: an hour over 30 days ago goes; the hour the horizon falls in stays.
    const hourOf = (time: number) => new Date(Math.floor(time / HOUR) * HOUR);
    for (const hour of [
      hourOf(now.getTime() - 31 * DAY),
      hourOf(now.getTime() - 30 * DAY),
      hourOf(now.getTime()),
    ])
      await sql`insert into endpoint_attempt_hours (endpoint_id, hour, attempts, succeeded, latency_histogram)
        values (${randomUUID()}, ${hour}, 1, 1, array_fill(0, array[${HISTOGRAM_BUCKETS}::int]))`.execute(
        database.db,
      );
    const keptDeliveries = kept.flatMap((k) => k.deliveries);
    const keptAttempts = await attemptsOf(database, keptDeliveries);

    const retention = createRetention({ database, days: 30, now: clock.now });
    const report = await retention.run();
    expect(removed(report)).toEqual({
      events: 3,
      deliveries: 3,
      delivery_attempts: 5,
      endpoint_attempt_hours: 1,
      idempotency_keys: 1,
      dashboard_sessions: 1,
    });
    expect(report.complete).toBe(true);
    expect(report.horizon).toEqual(new Date(now.getTime() - 30 * DAY));
    expect(report.horizon).toEqual(retentionHorizon(30, now));
    expect(await ids(database, 'events')).toEqual(kept.map((k) => k.event).sort());
    expect(await ids(database, 'deliveries')).toEqual([...keptDeliveries].sort());
    expect(await attemptsOf(database, keptDeliveries)).toBe(keptAttempts);
    expect(
      await attemptsOf(
        database,
        gone.flatMap((g) => g.deliveries),
      ),
    ).toBe(0);
    expect(await database.db.selectFrom('payments').select('id').execute()).toEqual([{ id: payment }]);
    expect(
      (await database.db.selectFrom('idempotency_keys').select('key').execute()).map((k) => k.key),
    ).toEqual(['new']);
    expect((await database.db.selectFrom('dashboard_sessions').select('id_hash').execute()).length).toBe(1);
    const hours = await database.db
      .selectFrom('endpoint_attempt_hours')
      .select('hour')
      .orderBy('hour')
      .execute();
    expect(hours.map((h) => new Date(h.hour))).toEqual([
      hourOf(now.getTime() - 30 * DAY),
      hourOf(now.getTime()),
    ]);

    // Nothing more at the same time; the pending redelivery keeps its event as the days go by.
    expect(removed(await retention.run())).toMatchObject({ events: 0, deliveries: 0, delivery_attempts: 0 });
    clock.advance(10 * DAY);
    const later = await retention.run();
    expect(later.removed.events).toBe(1);
    expect(await ids(database, 'events')).toEqual(
      [kept[0]?.event, kept[1]?.event, kept[2]?.event].map(String).sort(),
    );
    await retention.stop();
  });

  it('keeps everything with retention off, and still drops expired idempotency keys', async () => {
    const now = new Date();
    await seedEvent(database, now, 400 * DAY, [
      { status: 'delivered', createdAgo: 400 * DAY, finishedAgo: 400 * DAY },
    ]);
    await database.db
      .insertInto('idempotency_keys')
      .values({
        business_id: BUSINESS,
        mode: 'test',
        key: 'old',
        request_hash: 'h',
        created_at: new Date(now.getTime() - 3 * DAY),
      })
      .execute();
    const report = await createRetention({ database, days: null, now: () => now }).run();
    expect(report.horizon).toBeNull();
    expect(retentionHorizon(loadConfig({ PAYHOOK_RETENTION_DAYS: 'off' }), now)).toBeNull();
    expect(removed(report)).toMatchObject({ events: 0, deliveries: 0, idempotency_keys: 1 });
    expect((await ids(database, 'events')).length).toBe(1);
  });

  it('works through a backlog in batches, oldest first, events of the same time included', async () => {
    const now = new Date();
    // Two events a time: a batch of 10 ends between the two of a time.
    await sql`insert into events (id, business_id, mode, type, payload, created_at)
      select gen_random_uuid(), ${BUSINESS}, 'test', 'payment.session.succeeded', '{}',
             ${now}::timestamptz - make_interval(days => 31 + n / 2)
      from generate_series(1, 25) as n`.execute(database.db);
    await sql`insert into deliveries (event_id, url, status, attempts, finished_at, created_at)
      select id, 'https://merchant.example/webhooks', 'delivered', 1, created_at, created_at from events`.execute(
      database.db,
    );
    const newest = await seedEvent(database, now, 31 * DAY, [{ status: 'pending', createdAgo: 31 * DAY }]);
    const report = await createRetention({ database, days: 30, now: () => now, batchSize: 10 }).run();
    expect(report.batches).toBe(3);
    expect(removed(report)).toMatchObject({ events: 25, deliveries: 25 });
    expect(await ids(database, 'events')).toEqual([newest.event]);
  });

  it('removes what the worker delivered once it is past the horizon, and never what it has yet to send', async () => {
    const clock = manualClock(new Date());
    const delivered = await queueDeliveries(database, receiver.url, 5);
    const worker = createDeliveryWorker({
      database,
      client: createDeliveryClient({ allowPrivate: true }),
      concurrency: 8,
      perUrlConcurrency: 8,
    });
    try {
      expect(await worker.runDue()).toBe(5);
    } finally {
      await worker.stop();
    }
    // Queued, not yet tried: pending.
    const waiting = await queueDeliveries(database, receiver.url, 2);
    const retention = createRetention({ database, days: 30, now: clock.now });
    expect(removed(await retention.run()).events).toBe(0);
    clock.advance(31 * DAY);
    const report = await retention.run();
    expect(removed(report)).toMatchObject({ events: 5, deliveries: 5, delivery_attempts: 5 });
    expect(await ids(database, 'deliveries')).toEqual([...waiting].sort());
    expect(await attemptsOf(database, delivered)).toBe(0);
  });

  it('a batch that fails is logged, and the pass goes on with the other tables', async () => {
    const now = new Date();
    await seedEvent(database, now, 40 * DAY, [
      { status: 'delivered', createdAgo: 40 * DAY, finishedAgo: 40 * DAY },
    ]);
    await database.db
      .insertInto('dashboard_sessions')
      .values({
        id_hash: 'expired',
        key_hash: 'k',
        business_id: BUSINESS,
        mode: 'test',
        csrf_token: 't',
        expires_at: new Date(now.getTime() - 60_000),
      })
      .execute();
    // The idempotency keys' statement fails, as a statement timeout would.
    const failing: KyselyPlugin = {
      transformQuery({ node }) {
        if (
          node.kind === 'RawNode' &&
          node.sqlFragments.join('').includes('delete from') &&
          JSON.stringify(node).includes('idempotency_keys')
        )
          throw new Error('canceling statement due to statement timeout');
        return node;
      },
      async transformResult({ result }) {
        return result;
      },
    };
    const errors: { table?: string }[] = [];
    const logger = { info() {}, warn() {}, error: (obj: object) => errors.push(obj as { table?: string }) };
    const report = await createRetention({
      database: { ...database, db: database.db.withPlugin(failing) },
      days: 30,
      now: () => now,
      logger,
    }).run();
    expect(report.complete).toBe(false);
    expect(removed(report)).toMatchObject({ events: 1, idempotency_keys: 0, dashboard_sessions: 1 });
    expect(errors.map((e) => e.table)).toEqual(['idempotency_keys']);
  });

  it('stop() ends a pass after the batch it is running', async () => {
    const now = new Date();
    for (let i = 0; i < 12; i++)
      await seedEvent(database, now, (40 + i) * DAY, [
        { status: 'delivered', createdAgo: (40 + i) * DAY, finishedAgo: 40 * DAY },
      ]);
    const held = holdingStatements(database, (text) => text.includes('delete from delivery_attempts'));
    const retention = createRetention({ database: held.database, days: 30, now: () => now, batchSize: 5 });
    const pass = retention.run();
    await held.reached;
    const stopped = retention.stop();
    held.release();
    await stopped;
    const report = await pass;
    expect(report.complete).toBe(false);
    expect(removed(report).events).toBe(5);
    expect((await ids(database, 'events')).length).toBe(7);
  });

  if (storage === 'pglite') {
    it("leaves the VACUUM of what it removed to PGlite's maintenance, which sees the dead rows", async () => {
      const now = new Date();
      await sql`insert into events (id, business_id, mode, type, payload, created_at)
        select gen_random_uuid(), ${BUSINESS}, 'test', 'payment.session.succeeded', '{}', ${now}::timestamptz - interval '40 days'
        from generate_series(1, 600)`.execute(database.db);
      await sql`insert into deliveries (event_id, url, status, attempts, finished_at, created_at)
        select id, 'https://merchant.example/webhooks', 'delivered', 1, created_at, created_at from events`.execute(
        database.db,
      );
      await sql`insert into delivery_attempts (delivery_id, attempt, url, started_at, latency_ms, status_code)
        select id, 1, url, created_at, 10, 200 from deliveries`.execute(database.db);
      const maintenance = createMaintenance({ database, intervalMs: 0 });
      await maintenance.run();
      const report = await createRetention({ database, days: 30, now: () => now }).run();
      expect(removed(report)).toMatchObject({ events: 600, deliveries: 600, delivery_attempts: 600 });
      const vacuumed = (await maintenance.run()).tables
        .filter((t) => t.action === 'vacuum')
        .map((t) => t.table);
      expect(vacuumed).toEqual(expect.arrayContaining(['events', 'deliveries', 'delivery_attempts']));
      await maintenance.stop();
    });
  }

  if (storage === 'postgres') {
    describe('beside concurrent transactions', () => {
      let client: pg.Client;
      beforeEach(async () => {
        client = new pg.Client({ connectionString: TEST_DATABASE_URL });
        await client.connect();
        const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(
          database.db,
        );
        await client.query(`set search_path = ${rows[0]?.schema}`);
      });
      afterEach(async () => {
        await client.query('rollback').catch(() => {});
        await client.end();
      });

      it('skips a delivery or an event another transaction holds, rather than wait for it', async () => {
        const now = new Date();
        const free = await seedEvent(database, now, 40 * DAY, [
          { status: 'failed', createdAgo: 40 * DAY, finishedAgo: 38 * DAY },
        ]);
        const redelivering = await seedEvent(database, now, 41 * DAY, [
          { status: 'failed', createdAgo: 41 * DAY, finishedAgo: 39 * DAY },
        ]);
        const referenced = await seedEvent(database, now, 42 * DAY);
        // A bulk redelivery holds a failed delivery; another transaction is writing a delivery
        // of an event (the foreign key's lock on it).
        await client.query('begin');
        await client.query('select 1 from deliveries where id = $1 for update', [redelivering.deliveries[0]]);
        await client.query('select 1 from events where id = $1 for key share', [referenced.event]);
        const retention = createRetention({ database, days: 30, now: () => now });
        const report = await retention.run();
        expect(removed(report)).toMatchObject({ events: 1, deliveries: 1 });
        expect(await ids(database, 'events')).toEqual([redelivering.event, referenced.event].sort());
        expect(await ids(database, 'events')).not.toContain(free.event);
        await client.query('commit');
        expect(removed(await retention.run())).toMatchObject({ events: 2, deliveries: 1 });
      });

      it("does not hold up the worker's claims and attempt records while a batch is open", async () => {
        const now = new Date();
        for (let i = 0; i < 20; i++)
          await seedEvent(database, now, (31 + i) * DAY, [
            { status: 'delivered', createdAgo: (31 + i) * DAY, finishedAgo: 31 * DAY },
          ]);
        // An old event redelivered now, and new ones: due, to the receiver.
        const old = await seedEvent(database, now, 40 * DAY);
        await database.db
          .insertInto('deliveries')
          .values({ event_id: old.event, url: receiver.url, next_attempt_at: new Date(Date.now() - 1000) })
          .execute();
        const fresh = await queueDeliveries(database, receiver.url, 3);
        const held = holdingStatements(database, (text) => text.includes('delete from delivery_attempts'));
        const pass = createRetention({ database: held.database, days: 30, now: () => now }).run();
        await held.reached;
        // The batch's transaction is open, its rows locked: the worker claims, sends and records.
        const worker = createDeliveryWorker({
          database,
          client: createDeliveryClient({ allowPrivate: true }),
          concurrency: 8,
          perUrlConcurrency: 8,
        });
        try {
          expect(await worker.runDue()).toBe(4);
        } finally {
          await worker.stop();
        }
        const statuses = await database.db
          .selectFrom('deliveries')
          .select('status')
          .where('url', '=', receiver.url)
          .execute();
        expect(statuses.map((s) => s.status)).toEqual(['delivered', 'delivered', 'delivered', 'delivered']);
        expect(await attemptsOf(database, fresh)).toBe(3);
        held.release();
        const report = await pass;
        expect(removed(report)).toMatchObject({ events: 20, deliveries: 20 });
        expect(await ids(database, 'events')).toContain(old.event);
      });

      it('a redelivery of an event that a batch is removing waits for the batch, then answers 404', async () => {
        const now = new Date();
        const app = await buildApp({
          database,
          config: loadConfig({
            PAYHOOK_API_KEYS: `sk_test_retention:${BUSINESS}:test`,
            PAYHOOK_ALLOW_PRIVATE_WEBHOOKS: '1',
          }),
          logger: false,
        });
        const base = await app.listen({ port: 0, host: '127.0.0.1' });
        const call = (method: string, path: string, body?: unknown) =>
          fetch(`${base}${path}`, {
            method,
            headers: { authorization: 'Bearer sk_test_retention', 'content-type': 'application/json' },
            body: JSON.stringify(body ?? {}),
          });
        try {
          expect((await call('POST', '/webhook-endpoints', { url: receiver.url })).status).toBe(201);
          const old = await seedEvent(database, now, 40 * DAY, [
            { status: 'failed', createdAgo: 40 * DAY, finishedAgo: 38 * DAY },
          ]);
          const held = holdingStatements(database, (text) => text.includes('delete from delivery_attempts'));
          const pass = createRetention({ database: held.database, days: 30, now: () => now }).run();
          await held.reached;
          const answer = call('POST', `/events/${old.event}/redeliver`);
          // Until the request waits for the event's row (its tuple lock, held while waiting).
          for (let tries = 0; ; tries++) {
            const { rows } = await client.query(
              `select count(*)::int as n from pg_locks where locktype = 'tuple' and relation = 'events'::regclass`,
            );
            if (rows[0].n > 0) break;
            if (tries > 500) throw new Error('the redelivery never waited for the batch');
            await new Promise((resolve) => setTimeout(resolve, 20));
          }
          held.release();
          const res = await answer;
          const body = (await res.json()) as { error: { message: string } };
          expect(res.status).toBe(404);
          expect(body.error.message).toContain('may have been removed by retention');
          expect(removed(await pass).events).toBe(1);
        } finally {
          await app.close();
        }
      });

      it('two instances passing at once remove each row once', async () => {
        const now = new Date();
        await sql`insert into events (id, business_id, mode, type, payload, created_at)
          select gen_random_uuid(), ${BUSINESS}, 'test', 'payment.session.succeeded', '{}',
                 ${now}::timestamptz - make_interval(days => 31, secs => n)
          from generate_series(1, 300) as n`.execute(database.db);
        await sql`insert into deliveries (event_id, url, status, attempts, finished_at, created_at)
          select id, 'https://merchant.example/webhooks', 'delivered', 1, created_at, created_at from events`.execute(
          database.db,
        );
        const [a, b] = await Promise.all(
          [1, 2].map(() => createRetention({ database, days: 30, now: () => now, batchSize: 20 }).run()),
        );
        const events = (a?.removed.events ?? 0) + (b?.removed.events ?? 0);
        const deliveries = (a?.removed.deliveries ?? 0) + (b?.removed.deliveries ?? 0);
        // One of them may have left the rest to the other (its lock taken), never both.
        expect(events).toBe(300);
        expect(deliveries).toBe(300);
        expect(a?.complete || b?.complete).toBe(true);
      });
    });
  }
});

describe.each(testStorages())('the service on %s', { timeout: 60_000 }, (storage) => {
  it('says at start when autovacuum is off, shows the tables and the passes on /metrics, and names the retention in a 404', async () => {
    const { database, cleanup } = await openTestDatabase(storage, 'retention_service');
    const logs: { level: number; msg: string }[] = [];
    const service = await startSender({
      config: loadConfig({
        PORT: '0',
        PAYHOOK_MAINTENANCE_INTERVAL_SECONDS: '0',
        PAYHOOK_API_KEYS: `sk_test_retention:${BUSINESS}:test`,
      }),
      database,
      logger: { level: 'info', stream: { write: (line: string) => logs.push(JSON.parse(line)) } },
      retention: { intervalMs: 0 },
    });
    try {
      const warnings = logs.filter((l) => l.level === 40 && /autovacuum/.test(l.msg));
      if (storage === 'postgres') {
        const { rows } = await sql<{ on: string }>`select current_setting('autovacuum') as on`.execute(
          database.db,
        );
        // The shared server of these tests runs with autovacuum off: the warning names it.
        expect(warnings.length).toBe(rows[0]?.on === 'off' ? 1 : 0);
        if (rows[0]?.on === 'off') expect(warnings[0]?.msg).toContain('autovacuum = off');
      } else {
        expect(warnings).toEqual([]);
      }

      const metrics = async () => (await fetch(`${service.url}/metrics`)).text();
      const before = await metrics();
      expect(before).toMatch(/^payhook_table_bytes\{table="events"\} [1-9]\d*$/m);
      expect(before).toMatch(/^payhook_table_bytes\{table="delivery_attempts"\} [1-9]\d*$/m);
      expect(before).toMatch(/^payhook_retention_last_run_timestamp_seconds 0$/m);
      expect(before).toMatch(/^payhook_retention_removed_total\{table="events"\} 0$/m);

      const now = new Date();
      await seedEvent(database, now, 31 * DAY, [
        { status: 'delivered', createdAgo: 31 * DAY, finishedAgo: 31 * DAY, attempts: 2 },
      ]);
      const report = await service.retention.run();
      const after = await metrics();
      expect(after).toMatch(/^payhook_retention_removed_total\{table="events"\} 1$/m);
      expect(after).toMatch(/^payhook_retention_removed_total\{table="delivery_attempts"\} 2$/m);
      const lastRun = Number(/^payhook_retention_last_run_timestamp_seconds (\S+)$/m.exec(after)?.[1]);
      expect(lastRun).toBe(report.finishedAt.getTime() / 1000);
      expect(logs.some((l) => l.msg === 'retention pass')).toBe(true);

      const missing = await fetch(`${service.url}/events/${randomUUID()}`, {
        headers: { authorization: 'Bearer sk_test_retention' },
      });
      expect(missing.status).toBe(404);
      const body = (await missing.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('not_found');
      expect(body.error.message).toContain('Events are kept 30 days (PAYHOOK_RETENTION_DAYS)');
    } finally {
      await service.close();
      await cleanup();
    }
  });
});

describe('the dashboard', { timeout: 60_000 }, () => {
  it("says on an event's page that an event past retention may have been removed", async () => {
    const sender = await startDashboardSender();
    try {
      const cookie = await signIn(sender.url, sender.keys.test);
      const page = await getPage(sender.url, `/dashboard/events/${randomUUID()}`, cookie);
      expect(page.status).toBe(404);
      expect(page.html).toContain(
        'Events are kept 30 days (PAYHOOK_RETENTION_DAYS): an older one may have been removed by retention.',
      );
    } finally {
      await sender.close();
    }
  });
});
