// @module-tag pglite
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Worker } from 'node:worker_threads';
import { describe, expect, it, vi } from 'vitest';
import { startLoopbackReceiver } from '../../../test/support/loopback-receiver.js';
import { copyPgliteTemplate } from '../../../test/support/pglite-template.js';
import { PGliteThread } from '../src/db/pglite-thread.js';
import { createAttemptRecorder } from '../src/delivery/attempt-recorder.js';
import { loadConfig, openDatabase, startSender } from '../src/index.js';
import { silentLogger } from '../src/logger.js';
import { sessionRequest } from './fixtures/requests.js';

// The embedded database dies under a running sender (its thread ends, as a WebAssembly abort or an
// out-of-memory end would end it): the process goes on, the API answers 503 database_unavailable
// (never a 500, never a hang), /healthz and /metrics say the database is down and that a restart
// is needed, the worker sends nothing more, and the sender still stops. A restart on the same
// directory finds every acknowledged session.

const KEY = 'sk_test_pglite_failure';

/**
 * Opens the embedded database in `dataDir` (a migrated copy of the template) and keeps the thread
 * it runs on, through a pass-through spy (nothing replaced), so that a test can end it.
 */
async function openEndable(dataDir: string) {
  await copyPgliteTemplate(dataDir);
  const threads: PGliteThread[] = [];
  const open = PGliteThread.open.bind(PGliteThread);
  const spy = vi.spyOn(PGliteThread, 'open').mockImplementation(async (dir) => {
    const thread = await open(dir);
    threads.push(thread);
    return thread;
  });
  const database = await openDatabase({ dataDir }).finally(() => spy.mockRestore());
  expect(threads).toHaveLength(1);
  const worker = (threads[0] as unknown as { worker: Worker }).worker;
  return { database, endThread: () => worker.terminate() };
}

describe('PGlite failing under a running sender', { timeout: 90_000 }, () => {
  it('answers 503, says to restart, stops, and a restart finds every acknowledged session', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'payhook-pglite-failure-'));
    const receiver = await startLoopbackReceiver({ respond: 200 });
    const config = loadConfig({
      PORT: '0',
      PAYHOOK_API_KEYS: `${KEY}:biz_pglite_failure:test`,
      PAYHOOK_ALLOW_PRIVATE_WEBHOOKS: '1',
      PAYHOOK_SHUTDOWN_GRACE_SECONDS: '1',
    });
    const errors: string[] = [];
    const logger = { level: 'warn', stream: { write: (line: string) => void errors.push(line) } };
    try {
      const { database, endThread } = await openEndable(join(dir, 'data'));
      const sender = await startSender({ config, database, logger });
      const call = (method: string, path: string, body?: unknown) =>
        fetch(`${sender.url}${path}`, {
          method,
          headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          signal: AbortSignal.timeout(10_000),
        });
      expect((await call('PATCH', '/accounts/settings', { webhook_urls: [receiver.url] })).status).toBe(200);
      const acknowledged: string[] = [];
      for (let i = 0; i < 5; i++) {
        const res = await call('POST', '/payment-sessions', sessionRequest);
        expect(res.status).toBe(201);
        acknowledged.push(((await res.json()) as { data: { payment: { id: string } } }).data.payment.id);
      }
      await receiver.waitFor(5);
      // One more, whose attempt hangs at the receiver: in flight when the database goes.
      receiver.respond('hang');
      const hanging = await call('POST', '/payment-sessions', sessionRequest);
      expect(hanging.status).toBe(201);
      acknowledged.push(((await hanging.json()) as { data: { payment: { id: string } } }).data.payment.id);
      await vi.waitFor(() => expect(receiver.inFlight()).toBe(1), { timeout: 10_000, interval: 20 });

      // The thread ends.
      await endThread();
      // A LISTEN on a thread that is gone fails at once rather than waiting for it.
      await expect(database.listen('payhook_after_failure', () => {})).rejects.toThrow(/PGlite failed/);

      for (let i = 0; i < 3; i++) {
        const res = await call('POST', '/payment-sessions', sessionRequest);
        expect(res.status).toBe(503);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe('database_unavailable');
      }
      expect((await call('GET', '/payments?limit=1')).status).toBe(503);
      const health = await fetch(`${sender.url}/healthz`, { signal: AbortSignal.timeout(10_000) });
      expect(health.status).toBe(503);
      expect(((await health.json()) as { checks: { database: string } }).checks.database).toMatch(
        /restart the sender/,
      );
      const metrics = await fetch(`${sender.url}/metrics`, { signal: AbortSignal.timeout(10_000) });
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toMatch(/^payhook_database_up 0$/m);
      // Said once, not at every request or every pass of the worker.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect(errors.filter((line) => /"level":50/.test(line) && !/database_unavailable/.test(line))).toEqual(
        [],
      );
      expect(receiver.received).toHaveLength(6);
      // The stop ends, with the database gone: the claim it could not give back waits for its lease.
      await sender.close();
      await database.close();
      expect(errors.join('')).toMatch(/deliveries in flight at shutdown could not be released/);

      // A restart on the same directory: every acknowledged session is there, each delivered once.
      const again = await startSender({ config: { ...config, dataDir: join(dir, 'data') }, logger: false });
      try {
        for (const id of acknowledged)
          expect(
            (
              await fetch(`${again.url}/payments/${id}`, {
                headers: { authorization: `Bearer ${KEY}` },
              })
            ).status,
          ).toBe(200);
        expect((await again.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
      } finally {
        await again.close();
      }
      expect(receiver.received).toHaveLength(6);
    } finally {
      await receiver.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('gives up, at a stop, an attempt record that waits for a database that is gone, and tries it no more', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'payhook-pglite-failure-'));
    try {
      const { database, endThread } = await openEndable(join(dir, 'data'));
      // Kept for a minute, as the worker keeps an outcome for half its lease while the database is away.
      const record = createAttemptRecorder({
        database,
        now: () => new Date(),
        random: Math.random,
        logger: silentLogger,
        retryForMs: 60_000,
      });
      await endThread();
      // Every write the recorder tries, counted on its way to the database (which fails it).
      let writes = 0;
      const delivery = database.delivery.bind(database);
      const counting = vi.spyOn(database, 'delivery').mockImplementation((fn) => {
        writes++;
        return delivery(fn);
      });
      try {
        const id = '6c1f8f1e-3d2a-4b5c-9d8e-7f6a5b4c3d2e';
        const claim = {
          id,
          token: id,
          event_id: id,
          url: 'http://127.0.0.1:9/hook',
          attempts: 0,
          first_attempt_at: null,
          payload: '{}',
          business_id: 'b',
          mode: 'test' as const,
          event_created_at: new Date(),
          endpoint_id: null,
        };
        const outcome = { ok: true, statusCode: 200, latencyMs: 3, responseBody: null, error: null };
        let settled = false;
        const written = record(claim, new Date(), outcome).finally(() => {
          settled = true;
        });
        // Tried, failed (the database is gone), tried again after its backoff: still waiting.
        await vi.waitFor(() => expect(writes).toBeGreaterThanOrEqual(2), { timeout: 10_000, interval: 20 });
        expect(settled).toBe(false);
        record.drop(new Set([id]));
        await written;
        const after = writes;
        // Past the longest backoff (2 s): nothing more is tried.
        await new Promise((resolve) => setTimeout(resolve, 2500));
        expect(writes).toBe(after);
      } finally {
        counting.mockRestore();
        await database.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
