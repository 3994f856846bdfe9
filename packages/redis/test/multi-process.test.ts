import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
// The example's own sender: delivers until 200, some events twice, some to two instances at once.
import { stream } from '../../../examples/multi-instance/send.mjs';
import { keyNames } from '../src/keys.js';
import { type FaultProxy, startProxy } from './proxy.js';
import { cleanup, connect, randomPrefix, TEST_REDIS_URL } from './redis.js';

const BIZ = 'e4d3c2b1-a0f9-4e8d-b7c6-5a4b3c2d1e0f';
const receiverScript = fileURLToPath(
  new URL('../../../examples/multi-instance/receiver.mjs', import.meta.url),
);
let redis: Redis;
const prefixes: string[] = [];
const children = new Set<ChildProcess>();

beforeAll(async () => {
  redis = await connect();
});
afterEach(async () => {
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

async function startInstance(env: Record<string, string>): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, [receiverScript], {
    env: { ...process.env, BUSINESS_ID: BIZ, PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.add(child);
  const [line] = (await once(createInterface({ input: child.stdout as NodeJS.ReadableStream }), 'line')) as [
    string,
  ];
  return { child, port: Number(line.split(' ')[1]) };
}

async function effects(prefix: string, expected: number): Promise<number[]> {
  let counts: number[] = [];
  for (let i = 0; i < 600; i++) {
    counts = Object.values(await redis.hgetall(`${prefix}:effects`)).map(Number);
    if (counts.length >= expected) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return counts;
}

// Real receiver processes over real HTTP sharing the real Redis; these run one at a time.
describe.sequential('several receiver processes sharing Redis', { timeout: 120_000 }, () => {
  it('processes each of 5,000 events exactly once (20% delivered twice, 10% to two instances at once)', async () => {
    const prefix = randomPrefix();
    prefixes.push(prefix);
    const instances = await Promise.all(
      [1, 2, 3].map((n) =>
        startInstance({ REDIS_URL: TEST_REDIS_URL, PAYHOOK_PREFIX: prefix, INSTANCE_NAME: `i${n}` }),
      ),
    );
    const urls = instances.map((i) => `http://127.0.0.1:${i.port}/webhooks`);
    const sent = await stream({ urls, businessId: BIZ, count: 5000, parallel: 30 });
    const counts = await effects(prefix, sent.length);
    expect(counts).toHaveLength(5000);
    expect(counts.filter((n) => n !== 1)).toEqual([]);
    const byInstance = Object.values(await redis.hgetall(`${prefix}:runs-by`)).map(Number);
    expect(byInstance).toHaveLength(3);
  });

  it('finishes every acknowledged event when an instance is killed with -9 mid-stream', async () => {
    const prefix = randomPrefix();
    prefixes.push(prefix);
    const concurrency = 10;
    const env = {
      REDIS_URL: TEST_REDIS_URL,
      PAYHOOK_PREFIX: prefix,
      HANDLER_DELAY_MS: '40',
      LEASE_MS: '1500',
      RECOVERY_INTERVAL_MS: '300',
      CONCURRENCY: String(concurrency),
    };
    const instances = await Promise.all(
      [1, 2, 3].map((n) => startInstance({ ...env, INSTANCE_NAME: `i${n}` })),
    );
    const urls = instances.map((i) => `http://127.0.0.1:${i.port}/webhooks`);
    const victim = instances[0] as { child: ChildProcess; port: number };
    let killed = false;
    let restarted: Promise<unknown> | undefined;
    const sent = await stream({
      urls,
      businessId: BIZ,
      count: 1500,
      parallel: 30,
      onProgress: (delivered: number) => {
        if (delivered === 500 && !killed) {
          killed = true;
          victim.child.kill('SIGKILL');
          // The same instance comes back on its port a moment later; until then its deliveries fail
          // and are sent again, as the service does.
          restarted = new Promise((resolve) => setTimeout(resolve, 800)).then(() =>
            startInstance({ ...env, INSTANCE_NAME: 'i1-restarted', PORT: String(victim.port) }),
          );
        }
      },
    });
    await restarted;
    expect(killed).toBe(true);
    const counts = await effects(prefix, sent.length);
    expect(counts).toHaveLength(1500);
    const extra = counts.reduce((a, b) => a + b, 0) - counts.length;
    console.log(
      `kill -9 mid-stream: 1500 events, all processed; ${extra} handler run(s) beyond one per event`,
    );
    // Only events whose handler was running at the kill can run twice: at most the concurrency.
    expect(extra).toBeLessThanOrEqual(concurrency);
  });

  it('answers 503 while Redis is unreachable, never 200 for an unrecorded event, and processes everything after', async () => {
    const prefix = randomPrefix();
    prefixes.push(prefix);
    const target = new URL(TEST_REDIS_URL);
    const proxy: FaultProxy = await startProxy({ host: target.hostname, port: Number(target.port || 6379) });
    try {
      // Only the store's connection goes through the proxy; the handlers' effects are written
      // straight to Redis, as a merchant's database would be on its own network path.
      const env = {
        REDIS_URL: proxy.url,
        EFFECTS_REDIS_URL: TEST_REDIS_URL,
        PAYHOOK_PREFIX: prefix,
        COMMAND_TIMEOUT_MS: '300',
        RECOVERY_INTERVAL_MS: '300',
        LEASE_MS: '5000',
      };
      const instances = await Promise.all(
        [1, 2, 3].map((n) => startInstance({ ...env, INSTANCE_NAME: `i${n}` })),
      );
      const urls = instances.map((i) => `http://127.0.0.1:${i.port}/webhooks`);
      const statuses = new Map<number, number>();
      let unrecorded = 0;
      let faulted = false;
      const sent = await stream({
        urls,
        businessId: BIZ,
        count: 1500,
        parallel: 20,
        onAnswer: async (status: number, body: string) => {
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
          if (status === 200) {
            // Read straight from Redis, not through the proxy: a 200 means the event is recorded.
            const { checksum } = JSON.parse(body) as { checksum: string };
            const record = keyNames(prefix, `${BIZ}:${checksum}`).record;
            if ((await redis.exists(record)) === 0) unrecorded++;
          }
        },
        onProgress: (delivered: number) => {
          if (delivered === 400 && !faulted) {
            faulted = true;
            proxy.blackhole();
            setTimeout(() => proxy.drop(), 700);
            setTimeout(() => proxy.restore(), 1500);
          }
        },
      });
      const counts = await effects(prefix, sent.length);
      console.log(
        `Redis partition mid-stream: answers by status ${JSON.stringify(Object.fromEntries(statuses))}`,
      );
      expect(statuses.get(503) ?? 0).toBeGreaterThan(0);
      expect(unrecorded).toBe(0);
      expect(counts).toHaveLength(1500);
      expect(counts.filter((n) => n !== 1)).toEqual([]);
    } finally {
      await proxy.close();
    }
  });
});
