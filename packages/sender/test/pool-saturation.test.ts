// @module-tag postgres
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../src/index.js';
import { startTestApp, type TestApp } from './fixtures/app.js';
import { sessionRequest } from './fixtures/requests.js';

// More requests than the API's pool has connections, each waiting longer than the acquire timeout
// (PAYHOOK_DB_ACQUIRE_TIMEOUT_MS): a flood past what the server can take. Each one waiting too long
// is answered 503 `database_unavailable` with a Retry-After, never a 500 or a hang; none of them
// writes anything; and the database is not taken for down: once a connection is free, the next
// request is served at once (a timeout waiting for the pool is the API's own queue, not an outage).

describe('the API past its pool, on PostgreSQL', { timeout: 60_000 }, () => {
  const KEY = 'sk_test_pool_saturation';
  let sender: TestApp;
  let database: Database;
  let url: string;

  beforeAll(async () => {
    // A pool of one connection that a request waits 200 ms for, set as an operator would.
    sender = await startTestApp('postgres', 'pool', {
      PAYHOOK_API_KEYS: `${KEY}:biz-pool:test`,
      PAYHOOK_DB_POOL_SIZE: '1',
      PAYHOOK_DB_ACQUIRE_TIMEOUT_MS: '200',
    });
    ({ database, url } = sender);
  }, 60_000);

  afterAll(() => sender?.close());

  const createSession = async () => {
    const response = await fetch(`${url}/payment-sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...sessionRequest, reference: `pool-${randomBytes(6).toString('hex')}` }),
    });
    return {
      status: response.status,
      retryAfter: response.headers.get('retry-after'),
      body: (await response.json()) as { error?: { code: string } },
    };
  };
  const payments = async () => {
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from payments`.execute(database.db);
    return rows[0]?.n;
  };

  it('answers 503 with a Retry-After to the requests that waited too long, writes none of them, and serves the next at once', async () => {
    expect((await createSession()).status).toBe(201);

    // The pool's one connection, held by a statement that waits on a gate.
    let open: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const holding = database.db.connection().execute(async (connection) => {
      await sql`select 1`.execute(connection);
      await gate;
    });
    try {
      const flood = await Promise.all(Array.from({ length: 8 }, createSession));
      for (const answer of flood) {
        expect(answer.status).toBe(503);
        expect(answer.body.error?.code).toBe('database_unavailable');
        expect(Number(answer.retryAfter)).toBeGreaterThanOrEqual(1);
      }
    } finally {
      open();
      await holding;
    }

    // Not taken for an outage: the database answers, so the next request is served.
    expect(database.health.state).not.toBe('down');
    expect((await createSession()).status).toBe(201);
    expect(await payments()).toBe(2);
  });
});
