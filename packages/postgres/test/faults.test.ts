// @module-tag postgres
// @module-tag process
import { createReceiver, silentLogger } from '@payhook/core';
import { createTestEvent } from '@payhook/core/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADAPTER_APPS } from '../../../test/support/adapter-apps.js';
import { type ScratchPostgres, startScratchPostgres } from '../../sender/test/fixtures/scratch-postgres.js';
import { createPostgresStore, pgTransaction } from '../src/index.js';

// The PostgreSQL store on a scratch cluster of the test's own, while events keep coming over HTTP:
// its client sessions terminated, the server crashed and restarted, then stopped for a while and
// started again, then frozen (SIGSTOP) and thawed. Meanwhile the receiver answers 503 store_unavailable, never a 200 it cannot keep;
// in the end every acknowledged event has committed its row, once.

const BIZ = 'f0e1d2c3-b4a5-4968-8776-655443322110';
const node = ADAPTER_APPS.find((app) => app.name === 'web (node:http)');
let db: ScratchPostgres;

beforeAll(async () => {
  db = await startScratchPostgres();
}, 60_000);
afterAll(async () => {
  await db?.destroy();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('the PostgreSQL store through restarts, a stop, a freeze and terminated sessions', () => {
  it('answers 503 store_unavailable while the database is gone, and loses nothing it acknowledged', {
    timeout: 60_000,
  }, async () => {
    const pool = new pg.Pool({ connectionString: db.url, max: 14, connectionTimeoutMillis: 500 });
    pool.on('error', () => {});
    await pool.query('CREATE TABLE effects (event_key text NOT NULL)');
    const store = createPostgresStore({ pool, commandTimeoutMs: 500 });
    const errors: string[] = [];
    const receiver = createReceiver({
      businessIds: [BIZ],
      allowedIps: ['127.0.0.1', '::1'],
      store,
      logger: silentLogger,
      leaseMs: 1500,
      recoveryIntervalMs: 200,
      retry: { attempts: 20, minDelayMs: 50, maxDelayMs: 300 },
    });
    receiver.onError((_error, info) => {
      errors.push(info.phase);
    });
    receiver.onAny(async (_event, context) => {
      await pgTransaction(context).query('INSERT INTO effects VALUES ($1)', [context.key]);
      await sleep(10);
    });
    const app = await (node as NonNullable<typeof node>).start(receiver);
    const url = `${app.url}/webhooks`;
    const events = Array.from({ length: 300 }, (_, i) =>
      createTestEvent('payment.session.succeeded', BIZ, { reference: `order_${i}` }),
    );
    const answers = new Map<number, number>();
    const post = async (body: string) => {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
      const answer = (await response.json()) as { error?: { code: string } };
      answers.set(response.status, (answers.get(response.status) ?? 0) + 1);
      return { status: response.status, code: answer.error?.code };
    };
    // Each event until it is acknowledged, as the service retries.
    let next = 0;
    const sender = async () => {
      while (next < events.length) {
        const body = JSON.stringify(events[next++]);
        while ((await post(body)).status !== 200) await sleep(50);
        await sleep(5);
      }
    };
    const sending = Promise.all(Array.from({ length: 6 }, sender));

    try {
      await sleep(300);
      expect(await db.terminateClients()).toBeGreaterThan(0);
      await sleep(300);
      await db.crashRestart();
      await sleep(300);
      await db.stop();
      const down = await post(JSON.stringify(createTestEvent('payment.session.succeeded', BIZ)));
      expect(down).toEqual({ status: 503, code: 'store_unavailable' });
      await sleep(700);
      await db.start();
      await sleep(300);
      // Frozen: connections stay open and nothing answers, so only the command timeout answers.
      // A claim sent to the frozen server may still commit once it thaws, after its 503: the
      // service retries that event, and it must run once all the same.
      const frozenEvent = createTestEvent('payment.session.succeeded', BIZ, { reference: 'order_frozen' });
      db.freeze();
      try {
        expect(await post(JSON.stringify(frozenEvent))).toEqual({ status: 503, code: 'store_unavailable' });
        await sleep(1500);
      } finally {
        db.thaw();
      }
      events.push(frozenEvent);
      while ((await post(JSON.stringify(frozenEvent))).status !== 200) await sleep(50);
      await sending;

      const reader = new pg.Pool({ connectionString: db.url, max: 2 });
      try {
        // Every event ends done, those cut off mid-transaction once their lease lapsed.
        const keys = events.map((event) => `${BIZ}:${event.checksum.toLowerCase()}`);
        let notDone = keys.length;
        for (let i = 0; i < 150 && notDone > 0; i++) {
          const { rows } = await reader.query(
            `SELECT count(*)::int AS n FROM payhook.inbox WHERE key = ANY($1) AND state = 'done'`,
            [keys],
          );
          notDone = keys.length - (rows[0] as { n: number }).n;
          if (notDone > 0) await sleep(100);
        }
        expect(notDone).toBe(0);
        const { rows } = await reader.query(
          'SELECT event_key, count(*)::int AS n FROM effects GROUP BY event_key',
        );
        expect(rows.map((row) => row.event_key).sort()).toEqual([...keys].sort());
        expect(rows.filter((row) => row.n !== 1)).toEqual([]);
      } finally {
        await reader.end();
      }
      expect(answers.get(503)).toBeGreaterThan(0);
      expect(errors).toContain('store');
    } finally {
      await app.close();
      await receiver.close();
      await pool.end();
    }
  });
});
