// @module-tag postgres
// @module-tag process
// @module-tag build
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { createTestEvent } from '@payhook/core/testing';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, dropSchemas, randomSchema, TEST_DATABASE_URL } from './postgres.js';

// examples/postgres-kysely as its README runs it (the built packages): two instances on one
// database, copies of each event sent to both at once and once more later, one credit per event.

const BIZ = '8e7d6c5b-4a39-4281-9f0e-d1c2b3a49586';
const example = fileURLToPath(new URL('../../../examples/postgres-kysely/receiver.mjs', import.meta.url));
let pool: pg.Pool;
const schemas: string[] = [];
const children: ChildProcess[] = [];

beforeAll(async () => {
  pool = await connect();
});
afterAll(async () => {
  for (const child of children) {
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
  }
  await dropSchemas(pool, schemas);
  await pool.end();
});

async function start(schema: string): Promise<string> {
  const child = spawn(process.execPath, [example], {
    env: { ...process.env, DATABASE_URL: TEST_DATABASE_URL, SCHEMA: schema, BUSINESS_ID: BIZ, PORT: '0' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  for await (const line of lines) {
    if (line.startsWith('ready ')) {
      // Its log lines from here on are not read, but drained.
      child.stdout?.resume();
      return `http://127.0.0.1:${line.slice('ready '.length)}/webhooks`;
    }
  }
  throw new Error('the example exited before it was ready');
}

describe('examples/postgres-kysely', () => {
  it('two instances credit each event once, copies sent to both at once', { timeout: 30_000 }, async () => {
    const schema = randomSchema();
    schemas.push(schema);
    const urls = [await start(schema), await start(schema)];
    const events = Array.from({ length: 20 }, () => createTestEvent('payment.session.succeeded', BIZ));
    const post = async (url: string, body: string) => {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
      await response.arrayBuffer();
      return response.status;
    };
    for (const event of events) {
      const body = JSON.stringify(event);
      expect(await Promise.all(urls.map((url) => post(url, body)))).toEqual([200, 200]);
      expect(await post(urls[0] as string, body)).toBe(200);
    }
    const expected = events.map((event) => event.data.reference).sort();
    let credited: string[] = [];
    for (let i = 0; i < 100 && credited.length < expected.length; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      credited = (await pool.query(`SELECT reference FROM "${schema}".credits ORDER BY reference`)).rows.map(
        (row) => row.reference,
      );
    }
    expect(credited).toEqual(expected);
    const { rows } = await pool.query(
      `SELECT count(*)::int AS n FROM "${schema}".orders WHERE status = 'paid'`,
    );
    expect(rows[0]).toEqual({ n: 20 });
  });
});
