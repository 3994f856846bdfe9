// @module-tag postgres
// Claims in groups: many claims share a statement, and grouping changes no claim's outcome: copies
// of a key, two instances claiming the same keys in opposite orders, a claim the server refuses, a
// store that does not answer.
import { randomBytes } from 'node:crypto';
import type { ClaimRequest } from '@payhook/core';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresStore, type PostgresStore, PostgresTimeoutError } from '../src/index.js';
import { connect, dropSchemas, randomSchema, TEST_DATABASE_URL } from './postgres.js';

let pool: pg.Pool;
const schemas: string[] = [];
const pools: pg.Pool[] = [];
beforeAll(async () => {
  pool = await connect(TEST_DATABASE_URL, 20);
});
afterAll(async () => {
  for (const other of pools.splice(0)) await other.end();
  await dropSchemas(pool, schemas);
  await pool.end();
});

const request = (owner: string): ClaimRequest => ({
  owner,
  leaseMs: 60_000,
  payload: '{}',
  businessId: 'biz',
});
const keys = (n: number) => Array.from({ length: n }, () => `biz:${randomBytes(16).toString('hex')}`);

/** A store on a pool of its own (an instance of its own), on the inbox at `schema`. */
async function instance(schema: string, commandTimeoutMs?: number): Promise<PostgresStore> {
  const own = await connect(TEST_DATABASE_URL, 20);
  pools.push(own);
  const store = createPostgresStore({ pool: own, schema, commandTimeoutMs });
  await store.migrate();
  return store;
}

function freshSchema(): string {
  const schema = randomSchema();
  schemas.push(schema);
  return schema;
}

/** Counts the claim statements `store`'s pool runs (the pool still runs each). */
function countClaims(store: PostgresStore): () => number {
  let n = 0;
  const query = store.pool.query.bind(store.pool) as (...args: unknown[]) => unknown;
  (store.pool as unknown as { query: (...args: unknown[]) => unknown }).query = (...args) => {
    const config = args[0] as { name?: string } | undefined;
    if (typeof config === 'object' && config?.name?.startsWith('payhook_claim_')) n++;
    return query(...args);
  };
  return () => n;
}

describe('claims in groups', () => {
  it('claims a burst of events in a few statements, each event once', async () => {
    const store = await instance(freshSchema());
    const statements = countClaims(store);
    const burst = keys(300);
    const results = await Promise.all(burst.map((key) => store.claim(key, request('a'))));
    expect(results.every((result) => result.status === 'claimed')).toBe(true);
    // Two go at once, and the rest wait for them in groups of at most 64.
    expect(statements()).toBeLessThanOrEqual(2 + Math.ceil(298 / 64) + 2);
    const again = await Promise.all(burst.map((key) => store.claim(key, request('b'))));
    expect(again.every((result) => result.status === 'duplicate')).toBe(true);
  });

  it('sends at most 1 MiB of payloads in one statement, and a larger payload alone', async () => {
    const store = await instance(freshSchema());
    const statements = countClaims(store);
    const large = { ...request('a'), payload: JSON.stringify({ text: 'x'.repeat(600_000) }) };
    const burst = keys(6);
    // The first two take the statements in flight; each of the four after them goes alone.
    const results = await Promise.all(burst.map((key, i) => store.claim(key, i < 2 ? request('a') : large)));
    expect(results.every((result) => result.status === 'claimed')).toBe(true);
    expect(statements()).toBe(6);
    const stored = await store.get(burst[5] as string);
    expect(stored?.payload).toBe(large.payload);
  });

  it('gives each key one winner when copies come in one burst from many owners', async () => {
    const store = await instance(freshSchema());
    const burst = keys(20);
    const claims = burst.flatMap((key) => Array.from({ length: 5 }, (_, i) => ({ key, owner: `o${i}` })));
    claims.sort(() => Math.random() - 0.5);
    const results = await Promise.all(claims.map(({ key, owner }) => store.claim(key, request(owner))));
    for (const key of burst) {
      const won = results.filter((result, i) => claims[i]?.key === key && result.status === 'claimed');
      expect(won).toHaveLength(1);
    }
  });

  it('lets two instances claim the same keys in opposite orders without a deadlock', async () => {
    const schema = freshSchema();
    const [a, b] = await Promise.all([instance(schema), instance(schema)]);
    for (let round = 0; round < 20; round++) {
      const burst = keys(64);
      const reversed = [...burst].reverse();
      const [fromA, fromB] = await Promise.all([
        Promise.all(burst.map((key) => a.claim(key, request('a')))),
        Promise.all(reversed.map((key) => b.claim(key, request('b')))),
      ]);
      burst.forEach((key, i) => {
        const won = [fromA[i], fromB[burst.length - 1 - i]].filter((result) => result?.status === 'claimed');
        expect(won, key).toHaveLength(1);
      });
    }
  });

  it('fails a claim the server refuses alone, and claims the rest of its group', async () => {
    const store = await instance(freshSchema());
    // Two claims take the statements in flight, so that those after them wait and go together.
    const first = keys(2).map((key) => store.claim(key, request('a')));
    const good = keys(10);
    const bad = `biz:${'\u0000'}`;
    const grouped = [...good.slice(0, 5), bad, ...good.slice(5)].map((key) =>
      store.claim(key, request('a')).then(
        (result) => ({ key, result }),
        (error: unknown) => ({ key, error }),
      ),
    );
    await Promise.all(first);
    const outcomes = await Promise.all(grouped);
    for (const outcome of outcomes) {
      if (outcome.key === bad) expect((outcome as { error: { code?: string } }).error.code).toMatch(/^22/);
      else expect(outcome).toMatchObject({ result: { status: 'claimed' } });
    }
  });

  it('times a waiting claim out within the store timeout when the statements in flight hang', async () => {
    const schema = freshSchema();
    const store = await instance(schema, 500);
    const held = keys(1)[0] as string;
    await store.claim(held, request('a'));
    // Another session holds the claimed row, so that the next claims of it hang on its lock.
    const blocker = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await blocker.connect();
    try {
      await blocker.query('BEGIN');
      await blocker.query(`SELECT 1 FROM "${schema}".inbox WHERE key = $1 FOR UPDATE`, [held]);
      const hanging = ['b', 'c'].map((owner) => store.claim(held, request(owner)).catch((error) => error));
      const waiting = store.claim(keys(1)[0] as string, request('d')).catch((error: unknown) => error);
      // The blocker holds its lock far longer than the timeout: each claim gives up on its own.
      const outcomes = await Promise.race([
        Promise.all([...hanging, waiting]),
        new Promise((resolve) => setTimeout(() => resolve('hung'), 10_000)),
      ]);
      expect(outcomes).not.toBe('hung');
      for (const outcome of outcomes as unknown[]) expect(outcome).toBeInstanceOf(PostgresTimeoutError);
    } finally {
      await blocker.query('ROLLBACK');
      await blocker.end();
    }
  });
});
