// @module-tag postgres
import { describeOrderContract, describeStoreContract } from '@payhook/core/testing';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresStore, inboxMigrationSql, migrateInbox, pgTransaction } from '../src/index.js';
import { connect, dropSchemas, randomSchema, TEST_DATABASE_URL } from './postgres.js';

let pool: pg.Pool;
const schemas: string[] = [];
beforeAll(async () => {
  // The contract's bursts of 200 claims queue on the pool, as a receiver's requests would.
  pool = await connect(TEST_DATABASE_URL, 20);
});
afterAll(async () => {
  await dropSchemas(pool, schemas);
  await pool.end();
});

const fresh = (options: { retentionMs?: number } = {}) => {
  const schema = randomSchema();
  schemas.push(schema);
  return createPostgresStore({ pool, schema, ...options });
};

describeStoreContract('postgres', async ({ retentionMs }) => fresh({ retentionMs }), {
  describe,
  it,
  expect,
  afterEach,
});

describeOrderContract('postgres', async ({ retentionMs }) => fresh({ retentionMs }), {
  describe,
  it,
  expect,
  afterEach,
});

describe('createPostgresStore', () => {
  it('validates its options', () => {
    expect(() => createPostgresStore({ pool, schema: 'bad-name' })).toThrow(/schema/);
    expect(() => createPostgresStore({ pool, table: '1x' })).toThrow(/table/);
    expect(() => createPostgresStore({ pool, retentionMs: 0 })).toThrow(/retentionMs/);
    expect(() => createPostgresStore({ pool, leaseMs: 0 })).toThrow(/leaseMs/);
    expect(() => createPostgresStore({ pool, commandTimeoutMs: -1 })).toThrow(/commandTimeoutMs/);
    expect(() => createPostgresStore({ pool: {} as never })).toThrow(/pg Pool/);
    expect(() => inboxMigrationSql({ schema: 'a"b' })).toThrow(/schema/);
  });

  it('ends the pool it made from a URL, and never a pool it was given', async () => {
    const schema = randomSchema();
    schemas.push(schema);
    const own = createPostgresStore({ pool: TEST_DATABASE_URL, schema });
    expect(await own.get('x:y')).toBeUndefined();
    await own.close?.();
    expect(own.pool.ended).toBe(true);
    const given = fresh();
    await given.close?.();
    expect((await pool.query('SELECT 1 AS one')).rows[0]).toEqual({ one: 1 });
  });

  it('creates its inbox once, however many instances start at once, in the schema it is given', async () => {
    const schema = randomSchema();
    schemas.push(schema);
    await Promise.all(Array.from({ length: 5 }, () => migrateInbox(pool, { schema, table: 'events' })));
    const store = createPostgresStore({ pool, schema, table: 'events', migrate: false });
    expect(store.table).toBe(`"${schema}"."events"`);
    expect(
      await store.claim('k', { owner: 'a', leaseMs: 1000, payload: '{}', businessId: 'b' }),
    ).toMatchObject({
      status: 'claimed',
    });
    const { rows } = await pool.query('SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = $1', [
      schema,
    ]);
    expect(rows[0]).toEqual({ n: 2 });
  });

  it('commits a transaction with the done mark, and rolls it back when the run throws or the owner lost the key', async () => {
    const store = fresh();
    const effects = `"${schemas.at(-1)}".effects`;
    await store.migrate();
    await pool.query(`CREATE TABLE ${effects} (key text NOT NULL)`);
    const request = { owner: 'a', leaseMs: 60_000, payload: '{}', businessId: 'b' };
    const write = (key: string) => async (transaction: unknown) => {
      await pgTransaction({ transaction } as never).query(`INSERT INTO ${effects} VALUES ($1)`, [key]);
    };

    await store.claim('ok', request);
    expect(await store.runInTransaction('ok', 'a', write('ok'))).toBe(true);
    expect(await store.get('ok')).toMatchObject({ state: 'done' });

    await store.claim('throws', request);
    await expect(
      store.runInTransaction('throws', 'a', async (transaction) => {
        await write('throws')(transaction);
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await store.get('throws')).toMatchObject({ state: 'processing', owner: 'a' });

    await store.claim('taken', request);
    expect(await store.runInTransaction('taken', 'someone-else', write('taken'))).toBe(false);
    expect(await store.get('taken')).toMatchObject({ state: 'processing', owner: 'a' });

    const { rows } = await pool.query(`SELECT key FROM ${effects}`);
    expect(rows).toEqual([{ key: 'ok' }]);
    expect(() => pgTransaction({} as never)).toThrow(/createPostgresStore/);
  });
});
