// @module-tag postgres
// @module-tag pglite
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type Database, loadConfig, type Resolver } from '../src/index.js';
import { customer, ngnBeneficiary, sessionRequest } from './fixtures/requests.js';
import { openTestDatabase, testStorages } from './fixtures/storage.js';

/**
 * Sender races: many copies of one request at once, over real HTTP, on PGlite (one connection:
 * statements queue) and on PostgreSQL (a pool: they truly interleave). One Idempotency-Key reused
 * concurrently creates one resource; concurrent state changes of one session give one success,
 * 409 for the rest, and one event.
 */

const COPIES = 8;
const resolve: Resolver = async (host) => {
  if (host === 'merchant.example') return ['93.184.216.34'];
  throw new Error(`ENOTFOUND ${host}`);
};

interface Answer {
  status: number;
  body: {
    data?: Record<string, unknown> & { id?: string; payment?: { id: string } };
    error?: { code: string };
  };
  replayed: boolean;
}

describe.each(testStorages())('sender races on %s', { timeout: 120_000 }, (storage) => {
  let app: FastifyInstance;
  let url: string;
  let database: Database;
  let cleanup: () => Promise<void>;
  let business = 0;

  beforeAll(async () => {
    ({ database, cleanup } = await openTestDatabase(storage, 'races'));
    const keys = Array.from({ length: 20 }, (_, i) => `sk_test_race_${i}:biz-race-${i}:test`).join(',');
    app = await buildApp({
      database,
      config: loadConfig({ PAYHOOK_API_KEYS: keys }),
      resolve,
      logger: false,
    });
    url = await app.listen({ port: 0, host: '127.0.0.1' });
  }, 120_000);

  afterAll(async () => {
    await app?.close();
    await cleanup?.();
  });

  /** A business of its own for each test, so that counts are of that test's rows only. */
  const nextBusiness = () => {
    const i = business++;
    return { key: `sk_test_race_${i}`, id: `biz-race-${i}` };
  };

  const send = async (
    apiKey: string,
    method: string,
    path: string,
    body?: unknown,
    idempotencyKey?: string,
  ): Promise<Answer> => {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${apiKey}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return {
      status: res.status,
      body: (await res.json()) as Answer['body'],
      replayed: res.headers.get('idempotent-replayed') === 'true',
    };
  };
  const all = <T>(make: (i: number) => Promise<T>) =>
    Promise.all(Array.from({ length: COPIES }, (_, i) => make(i)));
  const count = async (table: 'payments' | 'customers' | 'beneficiaries', businessId: string) =>
    Number(
      (
        await database.db
          .selectFrom(table)
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .where('business_id', '=', businessId)
          .executeTakeFirstOrThrow()
      ).n,
    );
  const eventsOf = async (paymentId: string, type: string) =>
    Number(
      (
        await database.db
          .selectFrom('events')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .where('payment_id', '=', paymentId)
          .where('type', '=', type)
          .executeTakeFirstOrThrow()
      ).n,
    );
  const idOf = (answer: Answer) => answer.body.data?.payment?.id ?? answer.body.data?.id;
  const codes = (answers: Answer[]) =>
    answers.filter((a) => a.status !== 200 && a.status !== 201).map((a) => a.body.error?.code);

  const creations = [
    ['/payment-sessions', 'payments', sessionRequest],
    ['/customers', 'customers', customer],
    ['/beneficiaries', 'beneficiaries', ngnBeneficiary],
  ] as const;

  it.each(creations)(
    'POST %s: concurrent copies with one Idempotency-Key and one body create one resource; the others get 409 or the replay',
    async (path, table, body) => {
      const { key, id } = nextBusiness();
      const answers = await all(() => send(key, 'POST', path, body, 'same-key-same-body'));
      expect(answers.map((a) => a.status).every((s) => s === 201 || s === 409)).toBe(true);
      const created = answers.filter((a) => a.status === 201);
      expect(created.length).toBeGreaterThanOrEqual(1);
      expect(created.filter((a) => !a.replayed)).toHaveLength(1);
      expect(new Set(created.map(idOf)).size).toBe(1);
      expect(new Set(codes(answers))).toEqual(
        new Set(answers.length > created.length ? ['idempotency_in_progress'] : []),
      );
      expect(await count(table, id)).toBe(1);
      // Once the first has answered, every retry replays it.
      const retry = await send(key, 'POST', path, body, 'same-key-same-body');
      expect(retry.status).toBe(201);
      expect(retry.replayed).toBe(true);
      expect(idOf(retry)).toBe(idOf(created[0] as Answer));
      expect(await count(table, id)).toBe(1);
    },
  );

  it.each(creations)(
    'POST %s: concurrent copies with one Idempotency-Key and different bodies create one resource; the others get 422',
    async (path, table, body) => {
      const { key, id } = nextBusiness();
      const bodies = Array.from({ length: COPIES }, (_, i) =>
        path === '/payment-sessions'
          ? { ...sessionRequest, amount: 150_000 + i }
          : path === '/customers'
            ? { ...customer, first_name: `Ada ${i}` }
            : { ...body, account_name: `Adaeze ${i}` },
      );
      const answers = await Promise.all(
        bodies.map((b) => send(key, 'POST', path, b, 'same-key-other-bodies')),
      );
      expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
      expect(codes(answers)).toEqual(Array(COPIES - 1).fill('idempotency_key_reused'));
      expect(answers.filter((a) => a.status === 422)).toHaveLength(COPIES - 1);
      expect(await count(table, id)).toBe(1);
    },
  );

  /** A session of a fresh business, captured unless told otherwise. */
  const session = async (captured = true) => {
    const { key } = nextBusiness();
    const created = await send(key, 'POST', '/payment-sessions', sessionRequest);
    expect(created.status).toBe(201);
    const id = idOf(created) as string;
    if (captured) expect((await send(key, 'POST', `/payment-sessions/${id}`, {})).status).toBe(200);
    return { key, id };
  };

  it('concurrent captures of one session: one succeeds, the others get 409 invalid_state', async () => {
    const { key, id } = await session(false);
    const answers = await all(() => send(key, 'POST', `/payment-sessions/${id}`, {}));
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    expect(codes(answers)).toEqual(Array(COPIES - 1).fill('invalid_state'));
    const row = await database.db
      .selectFrom('payments')
      .select(['data'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    type Captured = { payment_method: { account_number: string } };
    const winner = answers.find((a) => a.status === 200)?.body.data?.payment as unknown as Captured;
    // The stored account is the one the single success answered with.
    expect((row.data as Captured).payment_method.account_number).toBe(winner.payment_method.account_number);
  });

  it('concurrent sandbox completions of one session: one succeeds with one succeeded event, the others get 409', async () => {
    const { key, id } = await session();
    const answers = await all(() =>
      send(key, 'POST', `/sandbox/payment-sessions/${id}/complete`, { outcome: 'succeeded' }),
    );
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 409)).toHaveLength(COPIES - 1);
    expect(new Set(codes(answers))).toEqual(new Set(['invalid_state']));
    expect(await eventsOf(id, 'payment.session.succeeded')).toBe(1);
    expect(await eventsOf(id, 'payment.session.failed')).toBe(0);
  });

  it('concurrent failures, expiries and completions of one session: one wins, the others get 409, one event', async () => {
    const { key, id } = await session();
    const answers = await all((i) =>
      i % 3 === 0
        ? send(key, 'POST', `/sandbox/payment-sessions/${id}/complete`, { outcome: 'failed' })
        : i % 3 === 1
          ? send(key, 'POST', `/sandbox/payment-sessions/${id}/expire`, {})
          : send(key, 'POST', `/sandbox/payment-sessions/${id}/complete`, { outcome: 'succeeded' }),
    );
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 409)).toHaveLength(COPIES - 1);
    const outcome =
      (await eventsOf(id, 'payment.session.failed')) + (await eventsOf(id, 'payment.session.succeeded'));
    expect(outcome).toBe(1);
  });

  it('concurrent settles of one captured payment: one succeeds with one succeeded event', async () => {
    const { key, id } = await session();
    expect(
      (
        await send(key, 'POST', `/sandbox/payment-sessions/${id}/complete`, {
          outcome: 'succeeded',
          settle: false,
        })
      ).status,
    ).toBe(200);
    const answers = await all(() => send(key, 'POST', `/sandbox/payment-sessions/${id}/settle`, {}));
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    expect(codes(answers)).toEqual(Array(COPIES - 1).fill('invalid_state'));
    expect(await eventsOf(id, 'payment.session.succeeded')).toBe(1);
  });

  it('concurrent copies of one redelivery with one Idempotency-Key make one set of deliveries', async () => {
    const { key } = nextBusiness();
    expect(
      (await send(key, 'PATCH', '/accounts/settings', { webhook_urls: ['https://merchant.example/hook'] }))
        .status,
    ).toBe(200);
    const created = await send(key, 'POST', '/payment-sessions', sessionRequest);
    const paymentId = idOf(created) as string;
    const event = await database.db
      .selectFrom('events')
      .select('id')
      .where('payment_id', '=', paymentId)
      .executeTakeFirstOrThrow();
    const deliveries = async () =>
      Number(
        (
          await database.db
            .selectFrom('deliveries')
            .select((eb) => eb.fn.countAll<string>().as('n'))
            .where('event_id', '=', event.id)
            .executeTakeFirstOrThrow()
        ).n,
      );
    expect(await deliveries()).toBe(1);
    const answers = await all(() =>
      send(key, 'POST', `/events/${event.id}/redeliver`, undefined, 'redeliver-once'),
    );
    expect(answers.every((a) => a.status === 202 || a.status === 409)).toBe(true);
    expect(answers.filter((a) => a.status === 202 && !a.replayed)).toHaveLength(1);
    expect(await deliveries()).toBe(2);
  });

  it('concurrent bulk redeliveries take each failed delivery once', async () => {
    const { key, id } = nextBusiness();
    expect(
      (
        await send(key, 'PATCH', '/accounts/settings', {
          webhook_urls: ['https://merchant.example/a', 'https://merchant.example/b'],
        })
      ).status,
    ).toBe(200);
    for (let i = 0; i < 5; i++)
      expect((await send(key, 'POST', '/payment-sessions', sessionRequest)).status).toBe(201);
    const failed = await database.db
      .updateTable('deliveries')
      .set({ status: 'failed', finished_at: new Date() })
      .where('event_id', 'in', database.db.selectFrom('events').select('id').where('business_id', '=', id))
      .returning('id')
      .execute();
    expect(failed).toHaveLength(10);
    const answers = await all(() =>
      send(key, 'POST', '/events/redeliver', { since: new Date(Date.now() - 3_600_000).toISOString() }),
    );
    expect(answers.every((a) => a.status === 202)).toBe(true);
    const redelivered = answers.reduce(
      (sum, a) => sum + ((a.body.data as { redelivered: number } | undefined)?.redelivered ?? 0),
      0,
    );
    expect(redelivered).toBe(10);
    const superseded = await database.db
      .selectFrom('deliveries')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where(
        'id',
        'in',
        failed.map((f) => f.id),
      )
      .where('superseded_by', 'is not', null)
      .executeTakeFirstOrThrow();
    expect(Number(superseded.n)).toBe(10);
    const fresh = await sql<{ n: string }>`
      select count(*)::text as n from deliveries d join events e on e.id = d.event_id
      where e.business_id = ${id} and d.status = 'pending'`.execute(database.db);
    expect(Number(fresh.rows[0]?.n)).toBe(10);
  });
});
