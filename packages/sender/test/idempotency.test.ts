// @module-tag postgres
// @module-tag pglite
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ABANDONED_AFTER_SECONDS, requestHash } from '../src/http/idempotency.js';
import { buildApp, type Database, loadConfig, type Schema } from '../src/index.js';
import { ngnBeneficiary } from './fixtures/requests.js';
import { openTestDatabase, testStorages } from './fixtures/storage.js';

/**
 * The database with its next atomic write held at a gate: a `transaction()`, or a single statement
 * run with `executeQuery` (how a session is created: its rows, its event and the stored response
 * in one statement). `entered` resolves when a request reaches it (its Idempotency-Key is claimed
 * by then, marked in progress), and the write starts when `release()` is called; `committed`
 * resolves once it has committed, and the request goes on only after `finish()`. Nothing is held
 * in the database meanwhile, so other requests run.
 */
function heldTransaction(database: Database) {
  const gate = () => {
    let open!: () => void;
    const opened = new Promise<void>((resolve) => {
      open = resolve;
    });
    return { open, opened };
  };
  const entered = gate();
  const start = gate();
  const committed = gate();
  const finish = gate();
  let armed = true;
  const held = async <T>(write: () => Promise<T>): Promise<T> => {
    entered.open();
    await start.opened;
    const result = await write();
    committed.open();
    await finish.opened;
    return result;
  };
  const db = new Proxy(database.db, {
    get(target, property) {
      if (property === 'transaction' && armed) {
        armed = false;
        return () => {
          const builder = target.transaction();
          return {
            execute: (fn: Parameters<typeof builder.execute>[0]) => held(() => builder.execute(fn)),
          };
        };
      }
      if (property === 'executeQuery' && armed) {
        armed = false;
        return (...args: Parameters<typeof target.executeQuery>) => held(() => target.executeQuery(...args));
      }
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as Kysely<Schema>;
  return {
    database: { ...database, db },
    entered: entered.opened,
    release: start.open,
    committed: committed.opened,
    finish: finish.open,
  };
}

const body = {
  customer: {
    first_name: 'Ngozi',
    last_name: 'Nwosu',
    email: 'ngozi@example.com',
    phone_number: '+2348022222222',
    billing_address: {
      line1: '2 Bode Thomas',
      line2: '',
      city: 'Surulere',
      state: 'Lagos',
      zip_code: '101283',
      country: 'NG',
    },
  },
  description: 'Order #5',
  currency: 'NGN',
  amount: 300000,
  metadata: { order: { identifier: 'ORD-5', items: [{ name: 'Book', type: 'physical' }] } },
};

describe.each(testStorages())('Idempotency-Key on %s', { timeout: 60_000 }, (storage) => {
  let app: FastifyInstance;
  let url: string;
  let database: Database;
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    ({ database, cleanup } = await openTestDatabase(storage, 'idem'));
    app = await buildApp({
      database,
      config: loadConfig({ PAYHOOK_API_KEYS: 'sk_test_idem:biz-i:test,sk_test_other:biz-j:test' }),
      logger: false,
    });
    url = await app.listen({ port: 0, host: '127.0.0.1' });
  }, 60_000); // PGlite's start and migrations can take longer than the default 10 s on a busy machine
  afterAll(async () => {
    await app?.close();
    await cleanup?.();
  });

  const post = (key: string | undefined, payload: unknown, apiKey = 'sk_test_idem', base = url) =>
    fetch(`${base}/payment-sessions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${apiKey}`,
        'content-type': 'application/json',
        ...(key ? { 'idempotency-key': key } : {}),
      },
      body: JSON.stringify(payload),
    });
  const paymentId = async (res: Response) =>
    ((await res.json()) as { data: { payment: { id: string } } }).data.payment.id;
  const eventCount = async () =>
    Number(
      (
        await database.db
          .selectFrom('events')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );

  it('replays the first response to a retry, and creates nothing more', async () => {
    const first = await post('order-5-attempt', body);
    expect(first.status).toBe(201);
    const id = await paymentId(first);
    const events = await eventCount();
    const retry = await post('order-5-attempt', { ...body, extra_field: undefined });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await paymentId(retry)).toBe(id);
    expect(await eventCount()).toBe(events);
  });

  it('refuses the same key with a different body (422), and keeps keys per business', async () => {
    expect((await post('shared-key', body)).status).toBe(201);
    const other = await post('shared-key', { ...body, amount: 400000 });
    expect(other.status).toBe(422);
    expect(((await other.json()) as { error: { code: string } }).error.code).toBe('idempotency_key_reused');
    expect((await post('shared-key', { ...body, amount: 400000 }, 'sk_test_other')).status).toBe(201);
  });

  it('replays a stored client error too', async () => {
    const bad = { ...body, amount: 5 };
    expect((await post('bad-amount', bad)).status).toBe(422);
    const again = await post('bad-amount', bad);
    expect(again.status).toBe(422);
  });

  it('never creates two sessions for concurrent requests with one key', async () => {
    const answers = await Promise.all([post('race', body), post('race', body), post('race', body)]);
    const statuses = answers.map((r) => r.status);
    expect(statuses.every((s) => s === 201 || s === 409)).toBe(true);
    const ids = new Set(await Promise.all(answers.filter((r) => r.status === 201).map(paymentId)));
    expect(ids.size).toBe(1);
  });

  it('answers 400 to a key longer than 255 characters', async () => {
    const res = await fetch(`${url}/payment-sessions`, {
      method: 'POST',
      headers: {
        authorization: 'Bearer sk_test_idem',
        'content-type': 'application/json',
        'idempotency-key': 'x'.repeat(300),
      },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(400);
  });

  /** A second service on the same database whose next transaction is held (see heldTransaction). */
  const heldService = async () => {
    const held = heldTransaction(database);
    const heldApp = await buildApp({
      database: held.database,
      config: loadConfig({ PAYHOOK_API_KEYS: 'sk_test_idem:biz-i:test' }),
      logger: false,
    });
    return { ...held, app: heldApp, url: await heldApp.listen({ port: 0, host: '127.0.0.1' }) };
  };
  const storedKey = (key: string) =>
    database.db
      .selectFrom('idempotency_keys')
      .select(['response_status', 'response_body', 'created_at'])
      .where('business_id', '=', 'biz-i')
      .where('key', '=', key)
      .executeTakeFirst();

  it('answers 409 to a retry that arrives while the first request runs, then replays the first', async () => {
    const held = await heldService();
    try {
      const first = post('in-flight', body, 'sk_test_idem', held.url);
      await held.entered; // the first request holds its key, and waits before its write
      expect((await storedKey('in-flight'))?.response_status).toBeNull();
      const events = await eventCount();
      const second = await post('in-flight', body);
      expect(second.status).toBe(409);
      expect(((await second.json()) as { error: { code: string } }).error.code).toBe(
        'idempotency_in_progress',
      );
      expect(await eventCount()).toBe(events); // the retry created nothing
      held.release();
      held.finish();
      const firstAnswer = await first;
      expect(firstAnswer.status).toBe(201);
      const id = await paymentId(firstAnswer);
      const third = await post('in-flight', body);
      expect(third.status).toBe(201);
      expect(third.headers.get('idempotent-replayed')).toBe('true');
      expect(await paymentId(third)).toBe(id);
      expect(await eventCount()).toBe(events + 1);
    } finally {
      held.release();
      held.finish();
      await held.app.close();
    }
  });

  it('stores the response with the session, in its transaction: a retry after the commit replays it', async () => {
    const held = await heldService();
    try {
      const first = post('committed', body, 'sk_test_idem', held.url);
      await held.entered;
      held.release();
      await held.committed; // committed; the first request has not answered (nor run onSend) yet
      const stored = await storeKeyAnswer('committed');
      expect(stored.status).toBe(201);
      // Were the process to die here, the key would still replay the session it created.
      const retry = await post('committed', body);
      expect(retry.status).toBe(201);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      const id = await paymentId(retry);
      expect(stored.id).toBe(id);
      held.finish();
      expect(await paymentId(await first)).toBe(id);
    } finally {
      held.release();
      held.finish();
      await held.app.close();
    }
  });
  const storeKeyAnswer = async (key: string) => {
    const row = await storedKey(key);
    return {
      status: row?.response_status,
      id: (JSON.parse(row?.response_body ?? '{}') as { data?: { payment: { id: string } } }).data?.payment.id,
    };
  };

  it.each([
    ['/customers', body.customer],
    ['/beneficiaries', ngnBeneficiary],
  ])(
    'stores the response of POST %s in the transaction that creates it: a retry after the commit replays it',
    async (path, payload) => {
      const held = await heldService();
      const key = `committed${path.replace('/', '-')}`;
      const send = (base: string) =>
        fetch(`${base}${path}`, {
          method: 'POST',
          headers: {
            authorization: 'Bearer sk_test_idem',
            'content-type': 'application/json',
            'idempotency-key': key,
          },
          body: JSON.stringify(payload),
        });
      const idOf = async (res: Response) => ((await res.json()) as { data: { id: string } }).data.id;
      try {
        const first = send(held.url);
        await held.entered;
        held.release();
        await held.committed; // committed; the first request has not answered (nor run onSend) yet
        const stored = await storedKey(key);
        expect(stored?.response_status).toBe(201);
        // Were the process to die here, the key would still replay what it created.
        const retry = await send(url);
        expect(retry.status).toBe(201);
        expect(retry.headers.get('idempotent-replayed')).toBe('true');
        const id = await idOf(retry);
        expect((JSON.parse(stored?.response_body ?? '{}') as { data: { id: string } }).data.id).toBe(id);
        held.finish();
        expect(await idOf(await first)).toBe(id);
      } finally {
        held.release();
        held.finish();
        await held.app.close();
      }
    },
  );

  /** A new session of biz-i (made through the main service), captured if asked, its funds received if asked. */
  const sessionOf = async (state: 'pending' | 'captured' | 'funds received') => {
    const id = await paymentId(await post(undefined, body));
    const call = (path: string, payload: unknown) =>
      fetch(`${url}${path}`, {
        method: 'POST',
        headers: { authorization: 'Bearer sk_test_idem', 'content-type': 'application/json' },
        body: JSON.stringify(payload),
      });
    if (state !== 'pending') expect((await call(`/payment-sessions/${id}`, {})).status).toBe(200);
    if (state === 'funds received') {
      const funds = await call(`/sandbox/payment-sessions/${id}/complete`, {
        outcome: 'succeeded',
        settle: false,
      });
      expect(funds.status).toBe(200);
    }
    return id;
  };
  /** A new session's event (payment.session.created). */
  const newEvent = async () => {
    const id = await paymentId(await post(undefined, body));
    return database.db
      .selectFrom('events')
      .select('id')
      .where('payment_id', '=', id)
      .executeTakeFirstOrThrow();
  };
  /** Every write that changes state after creation, with what it needs set up first. */
  const laterWrites: Record<string, () => Promise<{ path: string; payload?: unknown; status: number }>> = {
    'POST /payment-sessions/{payment_id}': async () => ({
      path: `/payment-sessions/${await sessionOf('pending')}`,
      payload: {},
      status: 200,
    }),
    'POST /sandbox/payment-sessions/{payment_id}/complete': async () => ({
      path: `/sandbox/payment-sessions/${await sessionOf('captured')}/complete`,
      payload: { outcome: 'failed' },
      status: 200,
    }),
    'POST /sandbox/payment-sessions/{payment_id}/settle': async () => ({
      path: `/sandbox/payment-sessions/${await sessionOf('funds received')}/settle`,
      payload: {},
      status: 200,
    }),
    'POST /sandbox/payment-sessions/{payment_id}/expire': async () => ({
      path: `/sandbox/payment-sessions/${await sessionOf('pending')}/expire`,
      status: 200,
    }),
    'POST /events/{id}/redeliver': async () => {
      const registered = await database.db
        .selectFrom('webhook_endpoints')
        .select('id')
        .where('business_id', '=', 'biz-i')
        .where('mode', '=', 'test')
        .executeTakeFirst();
      if (!registered) {
        await database.db
          .insertInto('webhook_endpoints')
          .values({
            business_id: 'biz-i',
            mode: 'test',
            url: 'https://merchant.example/hook',
            account_secrets: true,
          })
          .execute();
      }
      const event = await newEvent();
      return { path: `/events/${event.id}/redeliver`, status: 202 };
    },
    'POST /events/redeliver': async () => ({
      path: '/events/redeliver',
      payload: { since: '2020-01-01T00:00:00Z' },
      status: 202,
    }),
    'POST /listen/attempts': async () => {
      const event = await newEvent();
      const attempt = {
        delivery_id: randomUUID(),
        event_id: event.id,
        url: 'http://localhost:3000/webhooks',
        started_at: new Date().toISOString(),
        latency_ms: 3,
        status_code: 200,
        response_body: 'ok',
        error: null,
      };
      return {
        path: '/listen/attempts',
        payload: { listener_id: 'lst_idem', attempts: [attempt] },
        status: 200,
      };
    },
    'POST /accounts/signing-secrets/rotate': async () => ({
      path: '/accounts/signing-secrets/rotate',
      payload: { overlap_seconds: 60 },
      status: 200,
    }),
    'POST /webhook-endpoints': async () => ({
      path: '/webhook-endpoints',
      payload: { url: 'https://merchant.example/idem', enabled_events: ['payment.session.failed'] },
      status: 201,
    }),
    'POST /webhook-endpoints/{id}/signing-secrets/rotate': async () => {
      const endpoint = await database.db
        .insertInto('webhook_endpoints')
        .values({ business_id: 'biz-i', mode: 'test', url: 'https://merchant.example/rotated' })
        .returning('id')
        .executeTakeFirstOrThrow();
      return {
        path: `/webhook-endpoints/${endpoint.id}/signing-secrets/rotate`,
        payload: { overlap_seconds: 60 },
        status: 200,
      };
    },
    'POST /webhook-endpoints/{id}/recover': async () => {
      const endpoint = await database.db
        .insertInto('webhook_endpoints')
        .values({ business_id: 'biz-i', mode: 'test', url: 'https://merchant.example/recovered' })
        .returning('id')
        .executeTakeFirstOrThrow();
      return {
        path: `/webhook-endpoints/${endpoint.id}/recover`,
        payload: { since: new Date(Date.now() - 3600_000).toISOString() },
        status: 202,
      };
    },
  };

  it('covers every POST route: each stores its response in the transaction of its write (tested here)', () => {
    const spec = app.swagger() as { paths: Record<string, Record<string, unknown>> };
    const posts = Object.entries(spec.paths).flatMap(([path, methods]) =>
      'post' in methods ? [`POST ${path}`] : [],
    );
    const covered = [
      'POST /payment-sessions',
      'POST /customers',
      'POST /beneficiaries',
      ...Object.keys(laterWrites),
    ];
    expect(new Set(posts)).toEqual(new Set(covered));
  });

  it.each(Object.keys(laterWrites))(
    '%s stores its response in the transaction of its write: a retry after the commit replays it',
    async (route) => {
      const { path, payload, status } = await (
        laterWrites[route] as () => Promise<{
          path: string;
          payload?: unknown;
          status: number;
        }>
      )();
      const held = await heldService();
      const key = `committed ${route}`.replace(/[^\x21-\x7e]/g, '-');
      const send = (base: string) =>
        fetch(`${base}${path}`, {
          method: 'POST',
          headers: {
            authorization: 'Bearer sk_test_idem',
            'idempotency-key': key,
            ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
          },
          ...(payload === undefined ? {} : { body: JSON.stringify(payload) }),
        });
      try {
        const first = send(held.url);
        await held.entered;
        held.release();
        await held.committed; // committed; the first request has not answered (nor run onSend) yet
        const stored = await storedKey(key);
        expect(stored?.response_status).toBe(status);
        // Were the process to die here, the key would still replay what the write did.
        const retry = await send(url);
        expect(retry.status).toBe(status);
        expect(retry.headers.get('idempotent-replayed')).toBe('true');
        expect(await retry.text()).toBe(stored?.response_body);
        held.finish();
        const answer = await first;
        expect(answer.status).toBe(status);
        expect(await answer.text()).toBe(stored?.response_body);
      } finally {
        held.release();
        held.finish();
        await held.app.close();
      }
    },
  );

  it(`takes over a key left in progress for more than ${ABANDONED_AFTER_SECONDS} s (its request died)`, async () => {
    const claim = (key: string, secondsAgo: number, payload: unknown = body) =>
      database.db
        .insertInto('idempotency_keys')
        .values({
          business_id: 'biz-i',
          mode: 'test',
          key,
          request_hash: requestHash('POST', '/payment-sessions', payload),
          created_at: new Date(Date.now() - secondsAgo * 1000),
        })
        .execute();
    // Abandoned: the retry runs, and from then on the key replays its answer.
    await claim('crashed', ABANDONED_AFTER_SECONDS + 60);
    const retry = await post('crashed', body);
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
    const id = await paymentId(retry);
    const stored = await storedKey('crashed');
    expect(stored?.response_status).toBe(201);
    expect(Date.now() - new Date(stored?.created_at ?? 0).getTime()).toBeLessThan(30_000); // a fresh start
    const again = await post('crashed', body);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await paymentId(again)).toBe(id);

    // Still within the bound: the first may be running, so 409.
    await claim('slow', ABANDONED_AFTER_SECONDS / 2);
    const busy = await post('slow', body);
    expect(busy.status).toBe(409);
    expect(((await busy.json()) as { error: { code: string } }).error.code).toBe('idempotency_in_progress');
    expect((await storedKey('slow'))?.response_status).toBeNull();

    // Abandoned, but by another request: still a reuse of the key (422), never taken over.
    await claim('crashed-other', ABANDONED_AFTER_SECONDS + 60, { ...body, amount: 999999 });
    const other = await post('crashed-other', body);
    expect(other.status).toBe(422);
    expect(((await other.json()) as { error: { code: string } }).error.code).toBe('idempotency_key_reused');
  });
});
