// @module-tag postgres
// @module-tag process
// @module-tag build
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createReceiver, type Receiver, silentLogger } from '@payhook/core';
import { createTestEvent } from '@payhook/core/testing';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADAPTER_APPS } from '../../../test/support/adapter-apps.js';
import { createPostgresStore, pgTransaction } from '../src/index.js';
import { connect, dropSchemas, randomSchema } from './postgres.js';

// Each framework adapter (Express, Koa, Fastify, the Web handler under Hono and node:http) with a
// receiver on the PostgreSQL store: copies of an event sent at once commit one row, and the built
// `payhook check` passes every case against it.

const BIZ = 'biz_postgres_adapters';
const CLI = fileURLToPath(new URL('../../cli/dist/cli.js', import.meta.url));
const run = promisify(execFile);
let pool: pg.Pool;
const schemas: string[] = [];

beforeAll(async () => {
  pool = await connect();
});
afterAll(async () => {
  await dropSchemas(pool, schemas);
  await pool.end();
});

describe.each(ADAPTER_APPS.map((app) => [app.name, app] as const))(
  '%s on the PostgreSQL store',
  (_, adapter) => {
    it('commits one row for copies sent at once, and passes payhook check', { timeout: 60_000 }, async () => {
      const schema = randomSchema();
      schemas.push(schema);
      const store = createPostgresStore({ pool, schema });
      await store.migrate();
      await pool.query(`CREATE TABLE "${schema}".effects (event_key text NOT NULL)`);
      const receiver: Receiver = createReceiver({
        businessIds: [BIZ],
        allowedIps: ['127.0.0.1', '::1'],
        store,
        logger: silentLogger,
        recoveryIntervalMs: 0,
      });
      receiver.onAny(async (_event, context) => {
        await pgTransaction(context).query(`INSERT INTO "${schema}".effects VALUES ($1)`, [context.key]);
      });
      const app = await adapter.start(receiver);
      try {
        const event = createTestEvent('payment.session.succeeded', BIZ);
        const statuses = await Promise.all(
          [1, 2, 3].map(async () => {
            const response = await fetch(`${app.url}/webhooks`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify(event),
            });
            await response.arrayBuffer();
            return response.status;
          }),
        );
        expect(statuses).toEqual([200, 200, 200]);
        await receiver.idle();
        const { rows } = await pool.query(`SELECT event_key FROM "${schema}".effects`);
        expect(rows).toEqual([{ event_key: `${BIZ}:${event.checksum.toLowerCase()}` }]);

        const { stdout } = await run(
          process.execPath,
          [CLI, 'check', `${app.url}/webhooks`, '--business-id', BIZ, '--json'],
          { env: { ...process.env, NO_COLOR: '1' } },
        );
        const report = JSON.parse(stdout) as { passed: boolean; cases: { name: string; ok: boolean }[] };
        expect(report.cases.filter((c) => !c.ok).map((c) => c.name)).toEqual([]);
        expect(report.passed).toBe(true);
      } finally {
        await app.close();
        await receiver.close();
      }
    });
  },
);
