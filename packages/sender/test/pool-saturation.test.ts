// @module-tag postgres
// @module-tag pglite
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './fixtures/app.js';
import { sessionRequest } from './fixtures/requests.js';

// More requests than the database can take, each waiting longer than the acquire timeout
// (PAYHOOK_DB_ACQUIRE_TIMEOUT_MS): a flood past what the server can take. On PostgreSQL the wait is
// for one of the API pool's connections; on PGlite, for the turn of its one session, or behind the
// statements already queued on its thread. Each request waiting too long is answered 503
// `database_unavailable` with a Retry-After, never a 500 or a hang; none of them writes anything;
// and the database is not taken for down: once it is free, the next request is served at once (a
// timeout waiting for it is the API's own queue, not an outage).

const KEY = 'sk_test_pool_saturation';

/** A sender with a wait of 200 ms, and on PostgreSQL a pool of one connection, set as an operator would. */
function startSaturatedApp(storage: 'postgres' | 'pglite') {
  return startTestApp(storage, 'pool', {
    PAYHOOK_API_KEYS: `${KEY}:biz-pool:test`,
    PAYHOOK_DB_POOL_SIZE: '1',
    PAYHOOK_DB_ACQUIRE_TIMEOUT_MS: '200',
  });
}

/** A session request, with the Idempotency-Key a client retries it with. */
const sessionCall = () => ({
  key: `pool-key-${randomBytes(6).toString('hex')}`,
  body: JSON.stringify({ ...sessionRequest, reference: `pool-${randomBytes(6).toString('hex')}` }),
});

async function createSession({ url }: TestApp, call = sessionCall()) {
  const response = await fetch(`${url}/payment-sessions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${KEY}`,
      'content-type': 'application/json',
      'idempotency-key': call.key,
    },
    body: call.body,
  });
  return {
    status: response.status,
    retryAfter: response.headers.get('retry-after'),
    replayed: response.headers.get('idempotent-replayed'),
    body: (await response.json()) as { error?: { code: string }; data?: { payment: { id: string } } },
  };
}

async function payments({ database }: TestApp) {
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from payments`.execute(database.db);
  return rows[0]?.n ?? 0;
}

/**
 * Eight sessions at once: each is answered 503 database_unavailable, with a Retry-After. Returns
 * the requests, for a client's retries.
 */
async function floodRefused(sender: TestApp) {
  const calls = Array.from({ length: 8 }, sessionCall);
  const flood = await Promise.all(calls.map((call) => createSession(sender, call)));
  for (const answer of flood) {
    expect(answer.status).toBe(503);
    expect(answer.body.error?.code).toBe('database_unavailable');
    expect(Number(answer.retryAfter)).toBeGreaterThanOrEqual(1);
  }
  return calls;
}

describe.each(['postgres', 'pglite'] as const)('the API past its database, on %s', (storage) => {
  let sender: TestApp;

  beforeAll(async () => {
    sender = await startSaturatedApp(storage);
  }, 60_000);

  afterAll(() => sender?.close());

  it('answers 503 with a Retry-After to the requests that waited too long for the database, writes none of them, and serves the next at once', async () => {
    const { database } = sender;
    const before = await payments(sender);
    expect((await createSession(sender)).status).toBe(201);

    // The API's one connection (PostgreSQL) or the session's turn (PGlite), held by a
    // transaction that waits on a gate.
    let open: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const holding = database.db.transaction().execute(async (tx) => {
      await sql`select 1`.execute(tx);
      await gate;
    });
    let refused: ReturnType<typeof sessionCall>[];
    try {
      refused = await floodRefused(sender);
    } finally {
      open();
      await holding;
    }

    // Not taken for an outage: the database answers, so the next request is served. A refused
    // request retried with its Idempotency-Key, as the 503 says, is made (it had claimed nothing),
    // and once only: the next retry replays it.
    expect(database.health.state).not.toBe('down');
    const retried = await createSession(sender, refused[0]);
    expect(retried.status).toBe(201);
    expect(retried.replayed).toBeNull();
    const again = await createSession(sender, refused[0]);
    expect(again.status).toBe(201);
    expect(again.replayed).toBe('true');
    expect(again.body.data?.payment.id).toBe(retried.body.data?.payment.id);
    expect(await payments(sender)).toBe(before + 2);
  });
});

describe("the API while PGlite's thread is behind", () => {
  let sender: TestApp;

  beforeAll(async () => {
    sender = await startSaturatedApp('pglite');
  }, 60_000);

  afterAll(() => sender?.close());

  it("answers 503 while the thread's oldest statement has waited longer than the wait, and never sheds the delivery worker's statements", async () => {
    const { database } = sender;
    const before = await payments(sender);
    // A statement of the worker's that holds the thread for 3 s; the turn is free once it is
    // sent, so what a request would wait behind is the thread's queue, not the turn.
    const slow = database.delivery((db) => sql`select pg_sleep(3)`.execute(db));
    await new Promise((resolve) => setTimeout(resolve, 400));
    try {
      await floodRefused(sender);
      // The worker's next statement waits behind it, as before: it is never refused.
      const workers = await database.delivery((db) => sql<{ one: number }>`select 1 as one`.execute(db));
      expect(workers.rows).toEqual([{ one: 1 }]);
    } finally {
      await slow;
    }

    expect(database.health.state).not.toBe('down');
    expect((await createSession(sender)).status).toBe(201);
    expect(await payments(sender)).toBe(before + 1);
  }, 30_000);
});
