// @module-tag postgres
import { createReceiver, type Receiver, silentLogger } from '@payhook/core';
import { createTestEvent } from '@payhook/core/testing';
import { drizzle } from 'drizzle-orm/node-postgres';
import { integer, pgSchema, text } from 'drizzle-orm/pg-core';
import { Kysely, PostgresDialect } from 'kysely';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresStore, pgTransaction, transactionPool } from '../src/index.js';
import { connect, dropSchemas, randomSchema } from './postgres.js';

// The attempt's transaction in a query builder's own types: Kysely over the transaction shaped as a
// pool (transactionPool), Drizzle over its client (pgTransaction). A first attempt that throws after
// its write leaves nothing; the retry's write commits with the done mark.

const BIZ = '5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a';
let pool: pg.Pool;
const schemas: string[] = [];

beforeAll(async () => {
  pool = await connect();
});
afterAll(async () => {
  await dropSchemas(pool, schemas);
  await pool.end();
});

interface Database {
  effects: { event_key: string; attempt: number };
}

type Write = (context: Parameters<typeof pgTransaction>[0], schema: string) => Promise<unknown>;

const WAYS: [string, Write][] = [
  [
    'Kysely',
    (context, schema) =>
      new Kysely<Database>({ dialect: new PostgresDialect({ pool: transactionPool(context) }) })
        .withSchema(schema)
        .insertInto('effects')
        .values({ event_key: context.key, attempt: context.attempt })
        .execute(),
  ],
  [
    'Drizzle',
    (context, schema) => {
      const effects = pgSchema(schema).table('effects', {
        eventKey: text('event_key').notNull(),
        attempt: integer().notNull(),
      });
      return drizzle(pgTransaction(context))
        .insert(effects)
        .values({ eventKey: context.key, attempt: context.attempt });
    },
  ],
];

describe.each(WAYS)('%s in the attempt’s transaction', (_, write) => {
  it('commits the write of the attempt that passes, with the done mark, and none of the one that threw', async () => {
    const schema = randomSchema();
    schemas.push(schema);
    const store = createPostgresStore({ pool, schema });
    await store.migrate();
    await pool.query(`CREATE TABLE "${schema}".effects (event_key text NOT NULL, attempt int NOT NULL)`);
    const receiver: Receiver = createReceiver({
      businessIds: [BIZ],
      allowAnyIp: true,
      store,
      logger: silentLogger,
      recoveryIntervalMs: 0,
      retry: { attempts: 2, minDelayMs: 5, maxDelayMs: 10 },
    });
    receiver.onAny(async (_event, context) => {
      await write(context, schema);
      if (context.attempt === 1) throw new Error('fails after its write');
    });
    const event = createTestEvent('payment.session.succeeded', BIZ);
    const key = `${BIZ}:${event.checksum.toLowerCase()}`;
    const result = await receiver.handle({
      method: 'POST',
      contentType: 'application/json',
      remoteAddress: '127.0.0.1',
      rawBody: JSON.stringify(event),
    });
    result.afterResponse?.();
    await receiver.idle();
    await receiver.close();
    const { rows } = await pool.query(`SELECT event_key, attempt FROM "${schema}".effects`);
    expect(rows).toEqual([{ event_key: key, attempt: 2 }]);
    expect(await store.get(key)).toMatchObject({ state: 'done' });
  });
});
