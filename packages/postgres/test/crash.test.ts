// @module-tag postgres
// @module-tag redis
// @module-tag process
import { createTestEvent } from '@payhook/core/testing';
import { createRedisStore } from '@payhook/redis';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanup, connect as connectRedis, randomPrefix } from '../../redis/test/redis.js';
import { createPostgresStore } from '../src/index.js';
import { type KillPlan, sendThrice, startCrashCluster } from './fixtures/crash-cluster.js';
import { connect, dropSchemas, randomSchema, TEST_DATABASE_URL } from './postgres.js';

// Three receiver processes on one database get every event three times (some copies at once to
// different instances), and are killed -9 mid-handler and between their insert and the commit,
// then started again. With the PostgreSQL store each event's row commits once; with the Redis
// store, a handler killed after its insert runs again elsewhere and writes its row twice.

const BIZ = '7b1e2d3c-4f5a-4b6c-8d7e-9f0a1b2c3d4e';
const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
let pool: pg.Pool;
const schemas: string[] = [];
const prefixes: string[] = [];

beforeAll(async () => {
  pool = await connect();
});
afterAll(async () => {
  await dropSchemas(pool, schemas);
  await pool.end();
  if (prefixes.length > 0) {
    const redis = await connectRedis(TEST_REDIS_URL);
    for (const prefix of prefixes) await cleanup(redis, prefix);
    redis.disconnect();
  }
});

/** Runs the scenario; resolves with each key's row count, and the keys each kind of kill cut off. */
async function scenario(store: 'postgres' | 'redis', count: number, plan: KillPlan) {
  const schema = randomSchema();
  schemas.push(schema);
  const prefix = randomPrefix();
  prefixes.push(prefix);
  await pool.query(`CREATE SCHEMA "${schema}"`);
  await pool.query(
    `CREATE TABLE "${schema}".effects (id bigserial PRIMARY KEY, event_key text NOT NULL, pid int)`,
  );
  const events = Array.from({ length: count }, (_, i) =>
    createTestEvent('payment.session.succeeded', BIZ, { reference: `order_${i}` }),
  );
  const keys = events.map((event) => `${BIZ}:${event.checksum.toLowerCase()}`);
  const cluster = await startCrashCluster(
    {
      STORE: store,
      DATABASE_URL: TEST_DATABASE_URL,
      SCHEMA: schema,
      REDIS_URL: TEST_REDIS_URL,
      PREFIX: prefix,
      BUSINESS_ID: BIZ,
      BEFORE_MS: '20',
      AFTER_MS: '80',
      LEASE_MS: '1500',
      RECOVERY_INTERVAL_MS: '200',
      CONCURRENCY: '16',
    },
    plan,
  );
  const reader =
    store === 'postgres'
      ? createPostgresStore({ pool, schema, migrate: false })
      : createRedisStore({ redis: TEST_REDIS_URL, prefix, checkPersistence: false });
  try {
    await sendThrice(
      cluster.urls,
      events.map((event) => JSON.stringify(event)),
    );
    // Every acknowledged event ends done: the killed ones once their lease lapses and an instance
    // recovers them.
    let pending = keys;
    for (let i = 0; i < 300 && pending.length > 0; i++) {
      const states = await Promise.all(pending.map((key) => reader.get(key)));
      pending = pending.filter((_, n) => states[n]?.state !== 'done');
      if (pending.length > 0) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(pending).toEqual([]);
  } finally {
    await cluster.stop();
    await reader.close?.();
  }
  const { rows } = await pool.query<{ event_key: string; n: number }>(
    `SELECT event_key, count(*)::int AS n FROM "${schema}".effects GROUP BY event_key`,
  );
  const rowsByKey = new Map(rows.map((row) => [row.event_key, row.n]));
  return {
    keys,
    rowsByKey,
    killedAfterInsert: cluster.killedAfterInsert,
    killedMid: cluster.killedMidHandler,
  };
}

describe('three receivers killed -9 mid-handler', { timeout: 120_000 }, () => {
  it('PostgreSQL store: exactly one row per event of 1,000, each sent three times', async () => {
    const result = await scenario('postgres', 1000, [
      ['inserted:20', 'started:30'],
      ['started:25', 'inserted:30'],
      ['inserted:25', 'inserted:35'],
    ]);
    expect(result.killedMid).toHaveLength(2);
    expect(result.killedAfterInsert).toHaveLength(4);
    expect([...result.rowsByKey.keys()].sort()).toEqual([...result.keys].sort());
    expect([...result.rowsByKey.values()].filter((n) => n !== 1)).toEqual([]);
    for (const key of [...result.killedAfterInsert, ...result.killedMid])
      expect(result.rowsByKey.get(key)).toBe(1);
  });

  it('Redis store, same scenario: a handler killed after its insert writes its row again elsewhere', async () => {
    const result = await scenario('redis', 300, [['inserted:20'], ['started:25'], ['inserted:40']]);
    expect(result.killedAfterInsert).toHaveLength(2);
    expect([...result.rowsByKey.keys()].sort()).toEqual([...result.keys].sort());
    // The effect of each run cut off between its insert and `complete` happened twice.
    for (const key of result.killedAfterInsert) expect(result.rowsByKey.get(key)).toBe(2);
  });
});
