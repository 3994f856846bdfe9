// @module-tag postgres
import { randomInt, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import {
  createNodeRequest,
  createReceiver,
  type PayhookEvent,
  type Receiver,
  silentLogger,
  writeResponse,
} from '@payhook/core';
import { createTestEvent } from '@payhook/core/testing';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresStore, pgTransaction } from '../src/index.js';
import { connect, dropSchemas, randomSchema } from './postgres.js';

// Per-payment order on the PostgreSQL store: three receivers on one database get each payment's
// created and terminal events shuffled and twice, some copies at once to two of them. Every payment
// ends in its latest state, written in the event's transaction; each distinct event ran once, through
// its handler or, stale, through onStale; one payment's handlers never ran at once.

const BIZ = '1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f';
let pool: pg.Pool;
const schemas: string[] = [];

/** A fresh schema (dropped after the file) holding the merchant's outcomes table and `tables`. */
async function merchantSchema(...tables: string[]): Promise<string> {
  const schema = randomSchema();
  schemas.push(schema);
  await pool.query(`CREATE SCHEMA "${schema}"`);
  for (const table of [...tables, 'outcomes (checksum text NOT NULL, how text NOT NULL)'])
    await pool.query(`CREATE TABLE "${schema}".${table}`);
  return schema;
}

beforeAll(async () => {
  pool = await connect(undefined, 30);
});
afterAll(async () => {
  await dropSchemas(pool, schemas);
  await pool.end();
});

const toRequest = createNodeRequest<IncomingMessage>({
  incoming: (req) => req,
  clientIp: (req) => req.socket.remoteAddress,
});
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function startReceiver(schema: string, running: Map<string, number>, overlaps: string[]) {
  const store = createPostgresStore({ pool, schema });
  const receiver: Receiver = createReceiver({
    businessIds: [BIZ],
    allowedIps: ['127.0.0.1', '::1'],
    store,
    logger: silentLogger,
    recoveryIntervalMs: 0,
  });
  receiver.onAny(async (event: PayhookEvent, context) => {
    const { id, status } = event.data as { id: string; status: string };
    running.set(id, (running.get(id) ?? 0) + 1);
    if ((running.get(id) ?? 0) > 1) overlaps.push(id);
    try {
      const db = pgTransaction(context);
      await sleep(3);
      await db.query(
        `INSERT INTO "${schema}".payments VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status`,
        [id, status],
      );
      await db.query(`INSERT INTO "${schema}".outcomes VALUES ($1, 'ran')`, [event.checksum]);
    } finally {
      running.set(id, (running.get(id) ?? 1) - 1);
    }
  });
  receiver.onStale(async (event, context) => {
    await pgTransaction(context).query(`INSERT INTO "${schema}".outcomes VALUES ($1, 'stale')`, [
      event.checksum,
    ]);
  });
  const server: Server = createServer((req, res) => {
    receiver.handle(toRequest(req)).then(
      (result) => writeResponse(res, result),
      () => {
        res.statusCode = 500;
        res.end('{}');
      },
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return {
    url: `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}/`,
    receiver,
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await receiver.close();
    },
  };
}

async function deliver(url: string, body: string): Promise<void> {
  for (let attempt = 0; attempt < 400; attempt++) {
    const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    await res.arrayBuffer();
    if (res.status === 200) return;
    await sleep(25);
  }
  throw new Error('no 200 after 400 tries');
}

describe('per-payment order on the PostgreSQL store', () => {
  it('three receivers: shuffled, duplicated events leave every payment in its latest state, stale events counted', {
    timeout: 60_000,
  }, async () => {
    const schema = await merchantSchema('payments (id text PRIMARY KEY, status text NOT NULL)');
    const running = new Map<string, number>();
    const overlaps: string[] = [];
    const apps = await Promise.all([1, 2, 3].map(() => startReceiver(schema, running, overlaps)));
    const pick = () => (apps[randomInt(apps.length)] as (typeof apps)[number]).url;
    try {
      const payments = Array.from({ length: 40 }, (_, i) => ({
        id: randomUUID(),
        terminal: i % 4 === 3 ? ('payment.session.failed' as const) : ('payment.session.succeeded' as const),
      }));
      const created = payments.map((p) => createTestEvent('payment.session.created', BIZ, { id: p.id }));
      const terminal = payments.map((p) => createTestEvent(p.terminal, BIZ, { id: p.id }));
      const outcomes = async () =>
        (await pool.query<{ checksum: string; how: string }>(`SELECT * FROM "${schema}".outcomes`)).rows;
      // The first ten payments end before their created events are sent: those are stale for sure.
      for (const event of terminal.slice(0, 10)) await deliver(pick(), JSON.stringify(event));
      while ((await outcomes()).length < 10) await sleep(20);
      const copies = [...created, ...terminal].flatMap((event) => [
        JSON.stringify(event),
        JSON.stringify(event),
      ]);
      for (let i = copies.length - 1; i > 0; i--) {
        const j = randomInt(i + 1);
        [copies[i], copies[j]] = [copies[j] as string, copies[i] as string];
      }
      let next = 0;
      await Promise.all(
        Array.from({ length: 12 }, async () => {
          while (next < copies.length) {
            const k = next++;
            const body = copies[k] as string;
            if (k % 7 === 0) await Promise.all([deliver(pick(), body), deliver(pick(), body)]);
            else await deliver(pick(), body);
          }
        }),
      );
      await Promise.all(apps.map((app) => app.receiver.idle()));
      for (let i = 0; i < 200 && (await outcomes()).length < 80; i++) await sleep(50);

      const states = new Map(
        (await pool.query<{ id: string; status: string }>(`SELECT * FROM "${schema}".payments`)).rows.map(
          (r) => [r.id, r.status],
        ),
      );
      for (const p of payments) {
        expect(states.get(p.id), p.id).toBe(
          p.terminal === 'payment.session.succeeded' ? 'settled' : 'failed',
        );
      }
      expect(overlaps).toEqual([]);
      const rows = await outcomes();
      // Each distinct event once, through its handler or through onStale.
      expect(rows).toHaveLength(80);
      expect(new Set(rows.map((r) => r.checksum)).size).toBe(80);
      const stale = rows.filter((r) => r.how === 'stale').map((r) => r.checksum);
      expect(stale.length).toBeGreaterThanOrEqual(10);
      const createdChecksums = new Set(created.map((event) => event.checksum));
      expect(stale.every((checksum) => createdChecksums.has(checksum))).toBe(true);
      expect(apps.reduce((n, app) => n + app.receiver.stats().stale, 0)).toBe(stale.length);
    } finally {
      await Promise.all(apps.map((app) => app.close()));
    }
  });

  it('the lock is committed at once, and its unflushed commit leaves synchronous_commit on for every connection and for the handlers', async () => {
    const schema = randomSchema();
    schemas.push(schema);
    const own = await connect(undefined, 3);
    const store = createPostgresStore({ pool: own, schema });
    try {
      const keys = Array.from({ length: 6 }, (_, i) => `${BIZ}:order-flush-${i}`);
      for (const key of keys) {
        await store.claim(key, { owner: 'a', leaseMs: 30_000, payload: '{}', businessId: BIZ });
        expect(await store.order.lock(key, 'a', `payment-${key}`)).toEqual({
          status: 'locked',
          rank: undefined,
        });
        // Committed: another claim of the same object sees the lock at once.
        await store.claim(`${key}-b`, { owner: 'b', leaseMs: 30_000, payload: '{}', businessId: BIZ });
        expect(await store.order.lock(`${key}-b`, 'b', `payment-${key}`)).toEqual({ status: 'busy' });
      }
      const clients = await Promise.all([own.connect(), own.connect(), own.connect()]);
      try {
        for (const client of clients) {
          expect((await client.query('SHOW synchronous_commit')).rows[0].synchronous_commit).toBe('on');
        }
      } finally {
        for (const client of clients) client.release();
      }
      const [key] = keys as [string];
      let inHandler: string | undefined;
      const committed = await store.runInTransaction(
        key,
        'a',
        async (transaction) => {
          const { rows } = await (transaction as pg.PoolClient).query('SHOW synchronous_commit');
          inHandler = rows[0].synchronous_commit;
        },
        { object: `payment-${key}`, rank: 1 },
      );
      expect(committed).toBe(true);
      expect(inHandler).toBe('on');
    } finally {
      await store.close?.();
      await own.end();
    }
  });

  it("runs the attempt on the lock's connection, inside the BEGIN sent with the lock, and gives back one that no attempt takes", async () => {
    const schema = randomSchema();
    schemas.push(schema);
    const own = await connect(undefined, 4);
    const store = createPostgresStore({ pool: own, schema });
    let acquired = 0;
    own.on('acquire', () => acquired++);
    const claim = (key: string, owner = 'a') =>
      store.claim(key, { owner, leaseMs: 30_000, payload: '{}', businessId: BIZ });
    const locked = { status: 'locked', rank: undefined };
    try {
      const [handed, left, busy] = ['handed', 'left', 'busy'].map((name) => `${BIZ}:order-ahead-${name}`) as [
        string,
        string,
        string,
      ];
      await claim(handed);
      acquired = 0;
      expect(await store.order.lock(handed, 'a', 'payment-handed')).toEqual(locked);
      let sameTransaction: boolean | undefined;
      const committed = await store.runInTransaction(
        handed,
        'a',
        async (transaction) => {
          // Inside the BEGIN the lock's round trip sent: the transaction began before this statement.
          const { rows } = await (transaction as pg.PoolClient).query(
            'SELECT now() < statement_timestamp() AS open',
          );
          sameTransaction = rows[0].open;
        },
        { object: 'payment-handed', rank: 1 },
      );
      expect(committed).toBe(true);
      expect(sameTransaction).toBe(true);
      // One connection for the lock and the attempt.
      expect(acquired).toBe(1);

      // A lock whose attempt never comes (its lease was lost, say), and a busy one: their
      // connections are rolled back and given back, none left inside a transaction.
      await claim(left);
      expect(await store.order.lock(left, 'a', 'payment-left')).toEqual(locked);
      await claim(busy, 'b');
      expect(await store.order.lock(busy, 'b', 'payment-left')).toEqual({ status: 'busy' });
      await new Promise((resolve) => setTimeout(resolve, 100));
      const clients = await Promise.all(Array.from({ length: 4 }, () => own.connect()));
      try {
        for (const client of clients) {
          const { rows } = await client.query('SELECT now() = statement_timestamp() AS fresh');
          expect(rows[0].fresh).toBe(true);
        }
      } finally {
        for (const client of clients) client.release();
      }
      // The attempt that comes late opens its own transaction.
      expect(await store.runInTransaction(left, 'a', () => {}, { object: 'payment-left', rank: 1 })).toBe(
        true,
      );
      expect((await store.get(left))?.state).toBe('done');
    } finally {
      await store.close?.();
      await own.end();
    }
  });

  it("on a pool of 3 (one connection for transactions), locks that wait for it and attempts handed their lock's connection run every event once, and leave none in a transaction", {
    timeout: 60_000,
  }, async () => {
    const schema = await merchantSchema();
    const own = await connect(undefined, 3);
    const receiver = createReceiver({
      businessIds: [BIZ],
      allowedIps: ['127.0.0.1'],
      store: createPostgresStore({ pool: own, schema }),
      logger: silentLogger,
      recoveryIntervalMs: 0,
      concurrency: 8,
    });
    const record = (how: string) => async (event: PayhookEvent, context: { transaction?: unknown }) => {
      await sleep(2);
      await pgTransaction(context as never).query(`INSERT INTO "${schema}".outcomes VALUES ($1, $2)`, [
        event.checksum,
        how,
      ]);
    };
    receiver.onAny(record('ran'));
    receiver.onStale(record('stale'));
    try {
      const events = Array.from({ length: 12 }, () => randomUUID()).flatMap((id) => [
        createTestEvent('payment.session.created', BIZ, { id }),
        createTestEvent('payment.session.succeeded', BIZ, { id }),
      ]);
      events.sort(() => randomInt(3) - 1);
      const results = await Promise.all(
        events.map((event) =>
          receiver.handle({
            method: 'POST',
            contentType: 'application/json',
            remoteAddress: '127.0.0.1',
            readBody: async () => new TextEncoder().encode(JSON.stringify(event)),
          }),
        ),
      );
      expect(results.map((r) => r.status)).toEqual(events.map(() => 200));
      // The 200s are sent: the work starts, every event at once.
      for (const result of results) void result.afterResponse?.();
      await expect
        .poll(
          async () => Number((await pool.query(`SELECT count(*) AS n FROM "${schema}".outcomes`)).rows[0].n),
          {
            timeout: 30_000,
            interval: 50,
          },
        )
        .toBe(events.length);
      const { rows } = await pool.query(
        `SELECT count(DISTINCT checksum)::int AS n FROM "${schema}".outcomes`,
      );
      expect(rows[0].n).toBe(events.length);
    } finally {
      await receiver.close();
    }
    const clients = await Promise.all(Array.from({ length: 3 }, () => own.connect()));
    try {
      for (const client of clients) {
        expect((await client.query('SELECT now() = statement_timestamp() AS fresh')).rows[0].fresh).toBe(
          true,
        );
      }
    } finally {
      for (const client of clients) client.release();
      await own.end();
    }
  });
});
