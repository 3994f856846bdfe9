// @module-tag postgres
// @module-tag process
// @module-tag build
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type LoopbackReceiver, startLoopbackReceiver } from '../../../test/support/loopback-receiver.js';
import { sessionRequest } from './fixtures/requests.js';
import { type ScratchPostgres, startScratchPostgres } from './fixtures/scratch-postgres.js';
import { spawnSender } from './fixtures/sender-process.js';

// A sender stopped (SIGTERM) while its PostgreSQL is down, with an attempt still in flight: the
// stop cannot give the delivery back, yet it ends (exit 0, after its grace) and says what becomes
// of it, and writes nothing after. Nothing is lost: a sender started once the database is back
// sends that delivery again when its lease ends.

const KEY = 'sk_test_shutdown_outage';
const BIZ = 'biz-shutdown-outage';

/** The payment ids of the `payment.session.created` events `receiver` got, in order. */
const createdIds = (receiver: LoopbackReceiver) =>
  receiver.received
    .map((r) => JSON.parse(r.body) as { event: string; data: { id: string } })
    .filter((e) => e.event === 'payment.session.created')
    .map((e) => e.data.id);

describe('stopping the sender while its PostgreSQL is down', { timeout: 180_000 }, () => {
  let db: ScratchPostgres;
  let receiver: LoopbackReceiver;

  beforeAll(async () => {
    db = await startScratchPostgres();
    receiver = await startLoopbackReceiver({ respond: 'hang' });
  }, 120_000);
  afterAll(async () => {
    await receiver?.close();
    await db?.destroy();
  });

  it('exits 0 after its grace, says the delivery goes again, and a later sender delivers it', async () => {
    const env = {
      DATABASE_URL: db.url,
      PAYHOOK_API_KEYS: `${KEY}:${BIZ}:test`,
      PAYHOOK_ALLOW_PRIVATE_WEBHOOKS: '1',
      PAYHOOK_SHUTDOWN_GRACE_SECONDS: '1',
      // Short, so that the later sender takes the delivery over within the test.
      PAYHOOK_DELIVERY_LEASE_SECONDS: '5',
      PAYHOOK_DB_ACQUIRE_TIMEOUT_MS: '1000',
      PAYHOOK_DB_STATEMENT_TIMEOUT_MS: '1500',
    };
    const first = await spawnSender(env, KEY);
    let paymentId = '';
    try {
      expect((await first.call('PATCH', '/accounts/settings', { webhook_urls: [receiver.url] })).status).toBe(
        200,
      );
      const created = await first.call('POST', '/payment-sessions', sessionRequest);
      expect(created.status).toBe(201);
      paymentId = (created.body as { data: { payment: { id: string } } }).data.payment.id;
      await vi.waitFor(() => expect(receiver.inFlight()).toBe(1), { timeout: 15_000, interval: 20 });

      await db.stop();
      expect(await first.stop('SIGTERM')).toEqual({ code: 0, signal: null });
      const output = first.output();
      expect(output).toMatch(/deliveries in flight at shutdown could not be released/);
      expect(output).not.toMatch(/a delivery attempt could not be signed or recorded|already been destroyed/);
    } finally {
      await first.stop('SIGKILL');
    }

    await db.start();
    receiver.respond(200);
    const second = await spawnSender(env, KEY);
    try {
      // The hanging attempt, then the one after the lease: at least once, never lost.
      await vi.waitFor(() => expect(createdIds(receiver).filter((id) => id === paymentId)).toHaveLength(2), {
        timeout: 60_000,
        interval: 100,
      });
    } finally {
      await second.stop('SIGTERM');
    }
  });
});
