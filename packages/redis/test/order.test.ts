// @module-tag redis
// @module-tag process
// Per-object order on the Redis store, over real HTTP: payments whose events come shuffled and
// duplicated to three receivers end in their latest state, stale events counted, and the handlers
// of one payment never overlap across instances; with order: false they do, and states go back.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomInt, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { createTestEvent } from '@payhook/core/testing';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
// The example's delivery: again until a 200, as the service does.
import { deliver } from '../../../examples/multi-instance/send.mjs';
import { type OrderedApp, startOrderedApp } from './fixtures/ordered-app.js';
import { cleanup, connect, randomPrefix, TEST_REDIS_URL } from './redis.js';

const BIZ = '7f3e2d1c-0b9a-4c8d-9e7f-6a5b4c3d2e1f';
const root = fileURLToPath(new URL('../../../', import.meta.url));
const orderedReceiver = fileURLToPath(new URL('./fixtures/ordered-receiver.ts', import.meta.url));
let redis: Redis;
const prefixes: string[] = [];
const apps: OrderedApp[] = [];
const children = new Set<ChildProcess>();

beforeAll(async () => {
  redis = await connect();
});
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
  await Promise.all(
    [...children].map(async (child) => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await once(child, 'exit');
      }
    }),
  );
  children.clear();
});
afterAll(async () => {
  for (const prefix of prefixes) await cleanup(redis, prefix);
  redis.disconnect();
});

function newPrefix(): string {
  const prefix = randomPrefix();
  prefixes.push(prefix);
  return prefix;
}

/** Three receivers in this process on one Redis, each on its own port. */
async function threeApps(prefix: string, options: { order?: boolean; handlerDelayMs?: number } = {}) {
  const started = await Promise.all(
    [0, 1, 2].map(() => startOrderedApp({ redisUrl: TEST_REDIS_URL, prefix, businessId: BIZ, ...options })),
  );
  apps.push(...started);
  return { apps: started, urls: started.map((app) => `http://127.0.0.1:${app.port}/`) };
}

/** A receiver process on one Redis, and its URL. */
async function receiverProcess(prefix: string, env: Record<string, string> = {}) {
  const child = spawn(process.execPath, ['--import', 'tsx', orderedReceiver], {
    cwd: root,
    env: { ...process.env, REDIS_URL: TEST_REDIS_URL, PAYHOOK_PREFIX: prefix, BUSINESS_ID: BIZ, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.add(child);
  const [line] = (await once(createInterface({ input: child.stdout as NodeJS.ReadableStream }), 'line')) as [
    string,
  ];
  return { child, url: `http://127.0.0.1:${Number(line.split(' ')[1])}/` };
}

interface Payment {
  id: string;
  terminal: 'payment.session.succeeded' | 'payment.session.failed';
}
const finalStatus = (payment: Payment) =>
  payment.terminal === 'payment.session.succeeded' ? 'settled' : 'failed';

/** Every distinct event handled or found stale, read once `expected` are, or after 30 s. */
async function settled(prefix: string, expected: number) {
  const tag = `{${prefix}}`;
  for (let i = 0; i < 600; i++) {
    // Distinct events, not the two tallies' sum: an event run twice after a kill can be in both
    // (its handler ran in the killed process, then the recovery found it stale), and the sum would
    // stop the wait early.
    const outcomes = new Set([...(await redis.hkeys(`${tag}:runs`)), ...(await redis.hkeys(`${tag}:stale`))]);
    if (outcomes.size >= expected) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    state: await redis.hgetall(`${tag}:state`),
    runs: await redis.hgetall(`${tag}:runs`),
    stale: await redis.hgetall(`${tag}:stale`),
    overlaps: await redis.hgetall(`${tag}:overlaps`),
  };
}

/**
 * The order scenario: `count` payments, each a created and then a succeeded (three in four) or a
 * failed. The terminal events of the first ten go out first and are handled; then every event is
 * sent twice, shuffled over the three receivers, one copy in seven to two receivers at once.
 */
async function sendShuffled(urls: string[], prefix: string, count = 40) {
  return sendShuffledTo(() => urls[randomInt(urls.length)] as string, prefix, count);
}

/** Delivers `body` until a 200, each try to the receiver `pick` names then. */
async function deliverAny(pick: () => string, body: string): Promise<void> {
  for (let attempt = 0; attempt < 400; attempt++) {
    try {
      const res = await fetch(pick(), {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
      await res.arrayBuffer();
      if (res.status === 200) return;
    } catch {
      // a receiver killed or not listening: another try
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error('no 200 after 400 tries');
}

async function sendShuffledTo(pick: () => string, prefix: string, count: number) {
  const payments: Payment[] = Array.from({ length: count }, (_, i) => ({
    id: randomUUID(),
    terminal: i % 4 === 3 ? 'payment.session.failed' : 'payment.session.succeeded',
  }));
  const created = payments.map((p) => createTestEvent('payment.session.created', BIZ, { id: p.id }));
  const terminal = payments.map((p) => createTestEvent(p.terminal, BIZ, { id: p.id }));
  for (const event of terminal.slice(0, 10)) await deliverAny(pick, JSON.stringify(event));
  await settled(prefix, 10);
  const copies = [...created, ...terminal].flatMap((event) => [JSON.stringify(event), JSON.stringify(event)]);
  for (let i = copies.length - 1; i > 0; i--) {
    const j = randomInt(i + 1);
    [copies[i], copies[j]] = [copies[j] as string, copies[i] as string];
  }
  let next = 0;
  const worker = async () => {
    while (next < copies.length) {
      const k = next++;
      const body = copies[k] as string;
      if (k % 7 === 0) await Promise.all([deliverAny(pick, body), deliverAny(pick, body)]);
      else await deliverAny(pick, body);
    }
  };
  await Promise.all(Array.from({ length: 12 }, worker));
  return { payments, created, terminal, result: await settled(prefix, 2 * count) };
}

describe.sequential('per-object order on the Redis store', { timeout: 90_000 }, () => {
  it('three receivers: shuffled, duplicated events leave every payment in its latest state, stale events counted', async () => {
    const prefix = newPrefix();
    const { apps: receivers, urls } = await threeApps(prefix);
    const { payments, created, result } = await sendShuffled(urls, prefix);
    for (const payment of payments) expect(result.state[payment.id], payment.id).toBe(finalStatus(payment));
    expect(result.overlaps).toEqual({});
    // Each distinct event ran exactly once: through its handler, or, stale, through onStale.
    const outcomes = { ...result.runs };
    for (const [checksum, n] of Object.entries(result.stale))
      outcomes[checksum] = String(Number(outcomes[checksum] ?? 0) + Number(n));
    expect(Object.keys(outcomes)).toHaveLength(2 * payments.length);
    expect(Object.values(outcomes).every((n) => n === '1')).toBe(true);
    // Only created events are stale, at least the ten whose payment ended before they were sent.
    const staleChecksums = Object.keys(result.stale);
    expect(staleChecksums.length).toBeGreaterThanOrEqual(10);
    const createdChecksums = new Set(created.map((event) => event.checksum));
    expect(staleChecksums.every((checksum) => createdChecksums.has(checksum))).toBe(true);
    expect(receivers.reduce((n, app) => n + app.receiver.stats().stale, 0)).toBe(staleChecksums.length);
  });

  it("never runs one payment's handlers at once across three receivers", async () => {
    const prefix = newPrefix();
    const { urls } = await threeApps(prefix, { handlerDelayMs: 20 });
    const ids = [randomUUID(), randomUUID(), randomUUID()];
    // Eight distinct events per payment, all sent at once over the three receivers.
    const bodies = ids.flatMap((id) =>
      Array.from({ length: 8 }, () =>
        JSON.stringify(createTestEvent('payment.session.succeeded', BIZ, { id })),
      ),
    );
    await Promise.all(bodies.map((body, i) => deliver(urls[i % 3] as string, body)));
    const result = await settled(prefix, bodies.length);
    expect(Object.keys(result.runs)).toHaveLength(bodies.length);
    expect(result.overlaps).toEqual({});
  });

  it('with order: false, handlers of one payment overlap and a late created moves a payment back', async () => {
    const prefix = newPrefix();
    const { apps: receivers, urls } = await threeApps(prefix, { order: false, handlerDelayMs: 20 });
    const id = randomUUID();
    const bodies = Array.from({ length: 8 }, () =>
      JSON.stringify(createTestEvent('payment.session.succeeded', BIZ, { id })),
    );
    await Promise.all(bodies.map((body, i) => deliver(urls[i % 3] as string, body)));
    await settled(prefix, bodies.length);
    const overlapping = await redis.hgetall(`{${prefix}}:overlaps`);
    expect(Number(overlapping[id] ?? 0)).toBeGreaterThan(0);
    await redis.del(`{${prefix}}:runs`);
    const { payments, result } = await sendShuffled(urls, prefix);
    const movedBack = payments.filter((payment) => result.state[payment.id] === 'pending');
    // At least the ten payments whose created came after their end went back to pending.
    expect(movedBack.length).toBeGreaterThanOrEqual(10);
    expect(result.stale).toEqual({});
    expect(receivers.every((app) => app.receiver.stats().stale === 0)).toBe(true);
  });

  it('three receiver processes: shuffled, duplicated events leave every payment in its latest state', async () => {
    const prefix = newPrefix();
    const urls = (await Promise.all([0, 1, 2].map(() => receiverProcess(prefix)))).map((p) => p.url);
    const { payments, result } = await sendShuffled(urls, prefix);
    for (const payment of payments) expect(result.state[payment.id], payment.id).toBe(finalStatus(payment));
    expect(result.overlaps).toEqual({});
    expect(Object.keys(result.runs).length + Object.keys(result.stale).length).toBe(2 * payments.length);
    expect(Object.keys(result.stale).length).toBeGreaterThanOrEqual(10);
  });

  it('a receiver process killed with -9 mid-stream: its payments move on once its leases lapse, and end in their latest state', async () => {
    const prefix = newPrefix();
    const env = { LEASE_MS: '1000', RECOVERY_INTERVAL_MS: '300', HANDLER_DELAY_MS: '20' };
    const receivers = await Promise.all([0, 1, 2].map(() => receiverProcess(prefix, env)));
    const urls = receivers.map((r) => r.url);
    const sending = sendShuffledTo(() => urls[randomInt(urls.length)] as string, prefix, 60);
    // Killed while it holds payments' locks and runs their handlers; a new process takes its place.
    while ((await redis.hlen(`{${prefix}}:runs`)) < 30)
      await new Promise((resolve) => setTimeout(resolve, 10));
    receivers[0]?.child.kill('SIGKILL');
    urls[0] = (await receiverProcess(prefix, env)).url;
    const { payments, result } = await sending;
    for (const payment of payments) expect(result.state[payment.id], payment.id).toBe(finalStatus(payment));
    // Every event reached its handler or onStale; one the killed process was running may have run
    // twice (at-least-once, as without order), none was lost.
    const outcomes = new Set([...Object.keys(result.runs), ...Object.keys(result.stale)]);
    expect(outcomes.size).toBe(2 * payments.length);
    expect(Object.keys(result.stale).length).toBeGreaterThanOrEqual(10);
    // A payment's running counter left above 0 is a handler run the kill cut short.
    const left = await redis.keys(`{${prefix}}:running:*`);
    const cut = (await Promise.all(left.map((key) => redis.get(key)))).filter((n) => Number(n) > 0).length;
    console.log(
      `kill -9 with per-payment order: ${payments.length} payments, all in their latest state; ${cut} handler run(s) cut short by the kill; ${Object.keys(result.stale).length} stale`,
    );
  });
});
