// @module-tag postgres
// @module-tag pglite
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient } from '../../../test/support/api-client.js';
import { HELD_UNTIL } from '../src/delivery/sql/held-deliveries.js';
import { buildApp, type Database, loadConfig } from '../src/index.js';
import { manualClock } from './fixtures/clock.js';
import { sessionRequest } from './fixtures/requests.js';
import { openTestDatabase } from './fixtures/storage.js';

/** The claim token of a delivery a worker holds, set by hand. */
const TOKEN = '00000000-0000-4000-8000-00000000c1a1';

// An endpoint's changes through the API, and what each does to its deliveries and its run of
// failures beside the row (endpoints/lifecycle.ts): the deleted-endpoint exit, the settings'
// webhook_urls, a new URL.
describe.each(['pglite', 'postgres'] as const)(
  'an endpoint’s lifecycle on %s',
  { timeout: 120_000 },
  (storage) => {
    let app: FastifyInstance;
    let base: string;
    let database: Database;
    let cleanup: () => Promise<void>;
    const clock = manualClock();
    const keys = [1, 2, 3].map((n) => `sk_test_life_${n}_${storage}`);

    beforeAll(async () => {
      ({ database, cleanup } = await openTestDatabase(storage, 'lifecycle'));
      app = await buildApp({
        database,
        config: loadConfig({
          PAYHOOK_API_KEYS: keys.map((k, i) => `${k}:biz-life-${i}:test`).join(','),
          PAYHOOK_ALLOW_PRIVATE_WEBHOOKS: '1',
        }),
        logger: false,
        now: clock.now,
      });
      base = await app.listen({ port: 0, host: '127.0.0.1' });
    }, 60_000);
    afterAll(async () => {
      await app?.close();
      await cleanup?.();
    });

    const call = (key: string, method: string, path: string, body?: unknown) =>
      // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field below
      apiClient(() => base, key)<any>(method, path, body);

    /** A session made over the API: one event, one delivery per endpoint that takes it. */
    const session = async (key: string) => {
      const res = await call(key, 'POST', '/payment-sessions', sessionRequest);
      expect(res.status).toBe(201);
    };

    const deliveriesOf = (endpointId: string) =>
      database.db
        .selectFrom('deliveries')
        .select(['id', 'status', 'last_error', 'claim_token', 'finished_at', 'next_attempt_at'])
        .where('endpoint_id', '=', endpointId)
        .orderBy('id')
        .execute();

    it('deleting an endpoint ends its pending deliveries, held and claimed ones too, failed with endpoint_deleted', async () => {
      const key = keys[0] as string;
      const gone = (await call(key, 'POST', '/webhook-endpoints', { url: 'https://gone.example/' })).body
        .data;
      const kept = (await call(key, 'POST', '/webhook-endpoints', { url: 'https://kept.example/' })).body
        .data;
      await session(key);
      await session(key);
      const [claimed, held] = await deliveriesOf(gone.id);
      // One delivery of the endpoint in flight (a worker's claim), the other held once it is disabled.
      await sql`update deliveries set claim_token = ${TOKEN}::uuid where id = ${claimed?.id}::uuid`.execute(
        database.db,
      );
      expect((await call(key, 'PATCH', `/webhook-endpoints/${gone.id}`, { status: 'disabled' })).status).toBe(
        200,
      );
      const before = await deliveriesOf(gone.id);
      expect(before.find((d) => d.id === held?.id)?.next_attempt_at).toEqual(HELD_UNTIL);
      expect(before.find((d) => d.id === claimed?.id)?.claim_token).toBe(TOKEN);

      expect((await call(key, 'DELETE', `/webhook-endpoints/${gone.id}`)).body.data).toEqual({
        id: gone.id,
        deleted: true,
      });
      const after = await deliveriesOf(gone.id);
      expect(after).toHaveLength(2);
      for (const d of after) {
        expect(d).toMatchObject({ status: 'failed', last_error: 'endpoint_deleted', claim_token: null });
        expect(d.finished_at).not.toBeNull();
      }
      // The other endpoint's deliveries go on.
      expect((await deliveriesOf(kept.id)).map((d) => d.status)).toEqual(['pending', 'pending']);
    });

    it('the settings webhook_urls: a left-out endpoint with its own secrets ends its deliveries, one with the business secrets keeps them', async () => {
      const key = keys[1] as string;
      const settings = await call(key, 'PATCH', '/accounts/settings', {
        webhook_urls: ['https://account.example/'],
      });
      expect(settings.status).toBe(200);
      const own = (await call(key, 'POST', '/webhook-endpoints', { url: 'https://own.example/' })).body.data;
      const listed = (await call(key, 'GET', '/webhook-endpoints')).body.data as {
        id: string;
        url: string;
      }[];
      const account = listed.find((e) => e.url === 'https://account.example/');
      await session(key);

      expect(
        (await call(key, 'PATCH', '/accounts/settings', { webhook_urls: [] })).body.data.webhook_urls,
      ).toEqual([]);
      expect((await call(key, 'GET', '/webhook-endpoints')).body.data).toEqual([]);
      expect((await deliveriesOf(own.id)).map((d) => [d.status, d.last_error])).toEqual([
        ['failed', 'endpoint_deleted'],
      ]);
      expect((await deliveriesOf(account?.id as string)).map((d) => [d.status, d.last_error])).toEqual([
        ['pending', null],
      ]);
    });

    it('a new URL forgets the run of failures of the old one; a description change keeps it', async () => {
      const key = keys[2] as string;
      const endpoint = (await call(key, 'POST', '/webhook-endpoints', { url: 'https://old.example/' })).body
        .data;
      await sql`insert into endpoint_failures (endpoint_id, failing_since, last_failure_at, attempts)
      values (${endpoint.id}::uuid, ${clock.now()}, ${clock.now()}, 3)`.execute(database.db);
      const failing = await call(key, 'PATCH', `/webhook-endpoints/${endpoint.id}`, {
        description: 'still failing',
      });
      expect(failing.body.data.failure).toMatchObject({ failed_attempts: 3 });
      const moved = await call(key, 'PATCH', `/webhook-endpoints/${endpoint.id}`, {
        url: 'https://new.example/',
      });
      expect(moved.body.data).toMatchObject({ url: 'https://new.example/', failure: null });
    });
  },
);
