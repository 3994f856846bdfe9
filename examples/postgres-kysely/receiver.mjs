// A receiver whose effects happen exactly once: the order marked paid and the customer's credit
// written with Kysely, in the transaction in which the PostgreSQL store marks the event done. Run
// several at once on one database: each event's credit is written once, whichever instance gets its
// copies, and whatever instance dies mid-handler.
//
// Configuration: DATABASE_URL (required), PORT (default 3000), BUSINESS_ID, ALLOWED_IPS,
// SCHEMA (the inbox's and the example's tables, default payhook_example). Prints `ready <port>`.
import { createReceiver } from '@payhook/core';
import { payhook } from '@payhook/express';
import { createPostgresStore, transactionPool } from '@payhook/postgres';
import express from 'express';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';

const env = process.env;
if (!env.DATABASE_URL) {
  console.error('Set DATABASE_URL, the PostgreSQL of your orders.');
  process.exit(2);
}
const schema = env.SCHEMA ?? 'payhook_example';
// Above the receiver's concurrency (10): each running handler holds a connection until it commits.
const pool = new pg.Pool({ connectionString: env.DATABASE_URL, max: 16 });

// The merchant's tables (in a real app, its own migrations create them).
await pool.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
await pool.query(
  `CREATE TABLE IF NOT EXISTS "${schema}".orders (reference text PRIMARY KEY, status text NOT NULL)`,
);
await pool.query(
  `CREATE TABLE IF NOT EXISTS "${schema}".credits (id bigserial PRIMARY KEY, reference text NOT NULL, amount bigint NOT NULL)`,
);

const receiver = createReceiver({
  businessIds: [env.BUSINESS_ID ?? 'c5a1f3e2-8b7d-4c6e-9f0a-1b2c3d4e5f60'],
  allowedIps: (env.ALLOWED_IPS ?? '127.0.0.1,::1').split(','),
  store: createPostgresStore({ pool, schema }),
});

/** Kysely over the attempt's transaction: what it writes commits with the event's done mark. */
const inTransaction = (context) =>
  new Kysely({ dialect: new PostgresDialect({ pool: transactionPool(context) }) }).withSchema(schema);

receiver.on('payment.session.succeeded', async (event, context) => {
  const db = inTransaction(context);
  const { reference, amount } = event.data;
  await db
    .insertInto('orders')
    .values({ reference, status: 'paid' })
    .onConflict((oc) => oc.column('reference').doUpdateSet({ status: 'paid' }))
    .execute();
  // Not idempotent on purpose: the transaction is what keeps it to one row per event.
  await db.insertInto('credits').values({ reference, amount }).execute();
  console.log(`credited ${reference} ${amount}`);
});

const app = express();
app.use('/webhooks', payhook(receiver));
const server = app.listen(Number(env.PORT ?? 3000), '127.0.0.1', () => {
  console.log(`ready ${server.address().port}`);
});
const stop = async () => {
  server.close();
  await receiver.close();
  await pool.end();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
