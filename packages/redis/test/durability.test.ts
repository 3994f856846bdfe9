// @module-tag redis
// @module-tag process
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import {
  createReceiver,
  type Logger,
  type Receiver,
  readRawBody,
  runAfterResponse,
  silentLogger,
} from '@payhook/core';
import { createTestEvent } from '@payhook/core/testing';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { type RedisProcess, startRedisServer } from '../../../test/support/redis-server.js';
import { createRedisStore, type RedisStore, type RedisStoreOptions } from '../src/index.js';
import { keyNames } from '../src/keys.js';

// Redis itself failing: servers of the tests' own, on loopback ports in their own directories
// (never the shared server), killed with -9 and started again on the same directory.

const BIZ = 'a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d';
const trackedReceiver = fileURLToPath(new URL('./fixtures/tracked-receiver.ts', import.meta.url));
const root = fileURLToPath(new URL('../../../', import.meta.url));

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

async function redisServer(options: Parameters<typeof startRedisServer>[0] = {}): Promise<RedisProcess> {
  const server = await startRedisServer(options);
  cleanups.push(() => server.destroy());
  return server;
}

/** A receiver on its own store, over real HTTP, recording the checksum of each event it processes. */
async function serveReceiver(
  url: string,
  options: { leaseMs?: number; store?: Omit<RedisStoreOptions, 'redis'> } = {},
): Promise<{
  url: string;
  processed: string[];
  receiver: Receiver;
  store: RedisStore;
  /** The names of the store errors the receiver reported. */
  storeErrors: string[];
  stop: () => Promise<void>;
}> {
  const store = createRedisStore({
    redis: url,
    prefix: 'payhook:durable',
    checkPersistence: false,
    ...options.store,
  });
  const receiver = createReceiver({
    businessIds: [BIZ],
    allowedIps: ['127.0.0.1', '::1'],
    store,
    leaseMs: options.leaseMs ?? 1500,
    recoveryIntervalMs: 200,
    logger: silentLogger,
  });
  const processed: string[] = [];
  const storeErrors: string[] = [];
  receiver.onError((error, info) => {
    if (info.phase === 'store') storeErrors.push((error as Error).name);
  });
  receiver.onAny((event) => {
    processed.push(event.checksum);
  });
  const server: Server = createServer((req, res) => {
    void receiver
      .handle({
        method: req.method ?? 'GET',
        contentType: req.headers['content-type'],
        remoteAddress: req.socket.remoteAddress,
        headers: req.headers,
        readBody: (maxBytes) => readRawBody(req, maxBytes),
      })
      .then((result) => {
        res.writeHead(result.status, { 'content-type': 'application/json', ...result.headers });
        res.end(JSON.stringify(result.body));
        if (result.afterResponse) runAfterResponse(res, result.afterResponse);
      });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  let stopped: Promise<void> | undefined;
  const stop = () => {
    stopped ??= (async () => {
      server.closeAllConnections();
      server.close();
      await receiver.close();
      await store.close?.();
    })();
    return stopped;
  };
  cleanups.push(stop);
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/webhooks`, processed, receiver, store, storeErrors, stop };
}

/** The tracked receiver in a process of its own, its handlers held for 10 minutes. */
async function heldReceiver(redisUrl: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', trackedReceiver], {
    cwd: root,
    env: {
      ...process.env,
      REDIS_URL: redisUrl,
      PAYHOOK_PREFIX: 'payhook:durable',
      BUSINESS_ID: BIZ,
      PORT: '0',
      HANDLER_DELAY_MS: '600000',
      LEASE_MS: '1500',
      RECOVERY_INTERVAL_MS: '60000',
      CONCURRENCY: '100',
    },
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await once(child, 'exit');
    }
  });
  const [line] = (await once(createInterface({ input: child.stdout as NodeJS.ReadableStream }), 'line')) as [
    string,
  ];
  return { child, url: `http://127.0.0.1:${line.split(' ')[1]}/webhooks` };
}

const events = (n: number, method: 'card' | 'bank_account') =>
  Array.from({ length: n }, (_, i) =>
    createTestEvent('payment.session.succeeded', BIZ, { amount: 1000 + i, method }),
  );

async function post(url: string, event: object): Promise<{ status: number; body: { duplicate?: boolean } }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(event),
  });
  return { status: res.status, body: (await res.json()) as { duplicate?: boolean } };
}

const checksumOf = (event: object) => (event as { checksum: string }).checksum;
const settle = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The counts the scenarios close with. */
interface Counts {
  acknowledged: number;
  processed: number;
  lost: number;
  processedTwice: number;
}

/**
 * Redis crashes (kill -9) with acknowledged events in it, and restarts on its directory: 10 events
 * finished before the crash (their idempotency records), 30 acknowledged by a receiver whose
 * handlers were still held (it dies with Redis); then a new receiver starts, recovers what Redis
 * kept, and the 10 finished events arrive again (a redelivery after the restart).
 */
async function crashRedis(redis: RedisProcess): Promise<Counts & { recovered: number; reprocessed: number }> {
  const before = await serveReceiver(redis.url);
  const finished = events(10, 'card');
  for (const event of finished) expect((await post(before.url, event)).status).toBe(200);
  await before.receiver.idle();
  expect(before.processed).toHaveLength(10);
  await before.stop();

  const held = await heldReceiver(redis.url);
  const acknowledged = events(30, 'bank_account');
  for (const event of acknowledged) expect((await post(held.url, event)).status).toBe(200);

  await redis.kill();
  held.child.kill('SIGKILL');
  await once(held.child, 'exit');
  await redis.start();

  const after = await serveReceiver(redis.url);
  // The held receiver's leases lapse 1.5 s after its last renewal; recovery looks every 200 ms.
  // Recovery works from the records in Redis: once none of the unfinished events has one (a
  // restart that kept nothing), none can be recovered, and there is no lease to wait out.
  const kept = async () => {
    for (const event of acknowledged) if (await after.store.get(`${BIZ}:${checksumOf(event)}`)) return true;
    return false;
  };
  const deadline = Date.now() + 8000;
  while (after.processed.length < acknowledged.length && Date.now() < deadline && (await kept()))
    await settle(100);
  await settle(1000);
  const recovered = after.processed.length;
  for (const event of finished) expect((await post(after.url, event)).status).toBe(200);
  await after.receiver.idle();
  const reprocessed = after.processed.length - recovered;

  const runs = new Map<string, number>();
  for (const checksum of [...before.processed, ...after.processed])
    runs.set(checksum, (runs.get(checksum) ?? 0) + 1);
  const all = [...finished, ...acknowledged].map(checksumOf);
  return {
    acknowledged: all.length,
    processed: all.filter((c) => runs.has(c)).length,
    lost: all.filter((c) => !runs.has(c)).length,
    processedTwice: all.filter((c) => (runs.get(c) ?? 0) > 1).length,
    recovered,
    reprocessed,
  };
}

describe.sequential('what the store needs from Redis', { timeout: 90_000 }, () => {
  it('reads the persistence settings and warns once when acknowledged events would not survive a restart', async () => {
    const volatile = await redisServer();
    const durable = await redisServer({ appendfsync: 'always' });
    const noConfig = await redisServer({ args: ['--rename-command', 'CONFIG', ''] });
    const logged: { level: string; msg: string }[] = [];
    const logger: Logger = {
      debug() {},
      info: (_o, msg) => logged.push({ level: 'info', msg: msg ?? '' }),
      warn: (_o, msg) => logged.push({ level: 'warn', msg: msg ?? '' }),
      error() {},
    };
    const stores = [volatile, durable, noConfig].map((server) =>
      createRedisStore({ redis: server.url, logger }),
    );
    cleanups.push(() => Promise.all(stores.map((s) => s.close?.())));
    const [v, d, n] = await Promise.all(stores.map((s) => s.persistence));
    expect(v).toEqual({ appendonly: 'no', appendfsync: 'everysec', survivesRestart: false });
    expect(d).toEqual({ appendonly: 'yes', appendfsync: 'always', survivesRestart: true });
    expect(n).toMatchObject({
      appendonly: undefined,
      survivesRestart: undefined,
      error: expect.stringMatching(/unknown command/i),
    });
    const warnings = logged.filter((l) => l.level === 'warn');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.msg).toContain(
      `Redis at 127.0.0.1:${volatile.port} keeps acknowledged events in memory only (appendonly no)`,
    );
    expect(warnings[0]?.msg).toContain('Set "appendonly yes"');
    expect(warnings[0]?.msg).toContain('checkPersistence: false');
    expect(logged.filter((l) => l.level === 'info')).toEqual([
      {
        level: 'info',
        msg: expect.stringContaining(
          `could not read the persistence settings of Redis at 127.0.0.1:${noConfig.port}`,
        ),
      },
    ]);
    const quiet = createRedisStore({ redis: volatile.url, logger, checkPersistence: false });
    expect(quiet.persistence).toBeUndefined();
    await quiet.close?.();
    expect(logged.filter((l) => l.level === 'warn')).toHaveLength(1);
  });

  it('with appendfsync always, a kill -9 of Redis loses nothing: every acknowledged event is processed once', async () => {
    const counts = await crashRedis(await redisServer({ appendfsync: 'always' }));
    console.log(`Redis kill -9, AOF always: ${JSON.stringify(counts)}`);
    expect(counts).toMatchObject({ acknowledged: 40, processed: 40, lost: 0, processedTwice: 0 });
    expect(counts).toMatchObject({ recovered: 30, reprocessed: 0 });
  });

  it('without AOF, the loss is what the README says: every unfinished event, and every idempotency record', async () => {
    const counts = await crashRedis(await redisServer());
    console.log(`Redis kill -9, no AOF: ${JSON.stringify(counts)}`);
    // The 30 acknowledged and unfinished events are gone; the 10 finished ones run again when
    // they arrive again, their records gone too.
    expect(counts).toMatchObject({ acknowledged: 40, processed: 10, lost: 30, processedTwice: 10 });
    expect(counts).toMatchObject({ recovered: 0, reprocessed: 10 });
  });

  it("with durability 'replicas', a 200 waits for the replica; without it, 503 and nothing acknowledged; then all processed once", async () => {
    const primary = await redisServer();
    const replica = await redisServer({ replicaOf: primary });
    const readReplica = new Redis(replica.port, '127.0.0.1', { maxRetriesPerRequest: 1 });
    readReplica.on('error', () => {});
    cleanups.push(async () => readReplica.disconnect());
    await waitForLink(readReplica);
    const { url, processed, receiver, storeErrors } = await serveReceiver(primary.url, {
      leaseMs: 30_000,
      store: { durability: 'replicas', replicas: 1, waitMs: 300, commandTimeoutMs: 1000 },
    });

    // Each 200 comes once the replica holds the claim: read there at once, it is found.
    const first = events(10, 'card');
    for (const event of first) {
      expect((await post(url, event)).status).toBe(200);
      const { record } = keyNames('payhook:durable', `${BIZ}:${checksumOf(event)}`);
      expect(await readReplica.hget(record, 'state'), record).not.toBeNull();
    }

    // The replica down: no claim is confirmed, so nothing is acknowledged.
    await replica.kill();
    const second = events(10, 'bank_account');
    const refused = await Promise.all(second.map((event) => post(url, event)));
    expect(refused.map((r) => r.status)).toEqual(Array(10).fill(503));
    expect(refused[0]?.body).toMatchObject({ error: { code: 'store_unavailable' } });
    // Duplicates are not acknowledged either: the answer waits for the replica too.
    expect((await post(url, first[0] as object)).status).toBe(503);
    expect(storeErrors).toEqual(Array(11).fill('ReplicationTimeoutError'));

    // The replica back: the service's retries are acknowledged, and every event is processed once.
    await replica.start();
    await waitForLink(readReplica);
    for (const event of second) expect((await post(url, event)).status).toBe(200);
    await receiver.idle();
    const all = [...first, ...second].map(checksumOf);
    expect([...processed].sort()).toEqual([...all].sort());
    console.log(
      `Redis replicas: acknowledged 10 with the replica up, 0 of 10 with it down (503), then 10 retried; processed ${processed.length}, twice ${processed.length - new Set(processed).size}`,
    );
  });
});

async function waitForLink(replica: Redis): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const info = await replica.info('replication').catch(() => '');
    if (info.includes('master_link_status:up')) return;
    await settle(50);
  }
  throw new Error('the replica did not link to its primary within 10 s');
}
