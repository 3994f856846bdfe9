// @module-tag redis
// @module-tag process
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { createTestEvent } from '@payhook/core/testing';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
// The example's own sender: delivers until 200, some events twice, some to two instances at once.
import { stream } from '../../../examples/multi-instance/send.mjs';
import { type FaultProxy, startProxy } from '../../../test/support/fault-proxy.js';
import { type RedisClusterProcess, startRedisCluster } from '../../../test/support/redis-cluster.js';
import { createRedisStore } from '../src/index.js';
import { keyNames } from '../src/keys.js';
import { cleanup, connect, randomPrefix, TEST_REDIS_URL } from './redis.js';

const BIZ = 'e4d3c2b1-a0f9-4e8d-b7c6-5a4b3c2d1e0f';
const receiverScript = fileURLToPath(
  new URL('../../../examples/multi-instance/receiver.mjs', import.meta.url),
);
// The kill -9 test's receiver: the example's, with its handler runs in flight tracked in Redis. It
// runs on the sources with tsx, from the repository root (whose tsconfig maps the package names).
const trackedReceiver = fileURLToPath(new URL('./fixtures/tracked-receiver.ts', import.meta.url));
const root = fileURLToPath(new URL('../../../', import.meta.url));
const checksumOf = (key: string) => key.slice(key.lastIndexOf(':') + 1);
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

async function startInstance(
  env: Record<string, string>,
  script = receiverScript,
): Promise<{ child: ChildProcess; port: number }> {
  const args = script.endsWith('.ts') ? ['--import', 'tsx', script] : [script];
  const child = spawn(process.execPath, args, {
    cwd: root,
    env: { ...process.env, BUSINESS_ID: BIZ, PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.add(child);
  const [line] = (await once(createInterface({ input: child.stdout as NodeJS.ReadableStream }), 'line')) as [
    string,
  ];
  return { child, port: Number(line.split(' ')[1]) };
}

/** Where a test's receivers keep their data, and a client of it to read what they did. */
interface Backend {
  name: string;
  /** The receivers' environment: REDIS_URL or REDIS_CLUSTER_NODES. */
  env: Record<string, string>;
  reader: Redis | Cluster;
  prefix: string;
}

/** The handlers' effect counters (a hash of counts by event) once `expected` events have one, or after 30 s. */
async function effects(reader: Redis | Cluster, key: string, expected: number): Promise<number[]> {
  // Waits on the hash's length, and reads the thousands of counters once.
  for (let i = 0; i < 600 && (await reader.hlen(key)) < expected; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return Object.values(await reader.hgetall(key)).map(Number);
}

// Real receiver processes over real HTTP sharing the real Redis; these run one at a time.
describe.sequential('several receiver processes sharing Redis', { timeout: 120_000 }, () => {
  // 2,000 events: 200 delivered to two instances at once and 200 again later, on three processes.
  // The races themselves are the next test's (hundreds of copies at once), and the partition test
  // holds 1,000 more events to exactly once on this server.
  it('processes each of 2,000 events exactly once (20% delivered twice, 10% to two instances at once)', async () => {
    const prefix = randomPrefix();
    prefixes.push(prefix);
    const instances = await Promise.all(
      [1, 2, 3].map((n) =>
        startInstance({ REDIS_URL: TEST_REDIS_URL, PAYHOOK_PREFIX: prefix, INSTANCE_NAME: `i${n}` }),
      ),
    );
    const urls = instances.map((i) => `http://127.0.0.1:${i.port}/webhooks`);
    const sent = await stream({ urls, businessId: BIZ, count: 2000, parallel: 30 });
    const counts = await effects(redis, `${prefix}:effects`, sent.length);
    expect(counts).toHaveLength(2000);
    expect(counts.filter((n) => n !== 1)).toEqual([]);
    const byInstance = Object.values(await redis.hgetall(`${prefix}:runs-by`)).map(Number);
    expect(byInstance).toHaveLength(3);
  });

  it('runs the handler once for concurrent copies: 20 to one instance, 50 spread over three', async () => {
    const prefix = randomPrefix();
    prefixes.push(prefix);
    const instances = await Promise.all(
      [1, 2, 3].map((n) =>
        startInstance({
          REDIS_URL: TEST_REDIS_URL,
          PAYHOOK_PREFIX: prefix,
          INSTANCE_NAME: `i${n}`,
          // Copies keep arriving while the first still runs.
          HANDLER_DELAY_MS: '30',
        }),
      ),
    );
    const urls = instances.map((i) => `http://127.0.0.1:${i.port}/webhooks`);
    // A copy is sent again on a 503 (the store may time out under this burst), as the sender does.
    const post = async (url: string, body: string) => {
      for (let attempt = 0; ; attempt++) {
        const response = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
        });
        const answer = { status: response.status, body: (await response.json()) as { duplicate?: boolean } };
        if (answer.status !== 503 || attempt === 100) return answer;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    };
    const plans = [
      ...Array.from({ length: 10 }, () => ({ copies: 20, spread: 1 })),
      ...Array.from({ length: 10 }, () => ({ copies: 50, spread: 3 })),
    ];
    const events = plans.map(() => createTestEvent('payment.session.succeeded', BIZ));
    const answers = await Promise.all(
      plans.map(({ copies, spread }, e) => {
        const body = JSON.stringify(events[e]);
        return Promise.all(Array.from({ length: copies }, (_, c) => post(urls[c % spread] as string, body)));
      }),
    );
    const counts = await effects(redis, `${prefix}:effects`, events.length);
    for (const [e, event] of events.entries()) {
      const replies = answers[e] ?? [];
      expect(replies.every((r) => r.status === 200)).toBe(true);
      expect(replies.filter((r) => r.body.duplicate !== true)).toHaveLength(1);
      expect(Number(await redis.hget(`${prefix}:effects`, event.checksum))).toBe(1);
    }
    expect(counts).toHaveLength(events.length);
  });

  it('finishes every acknowledged event when an instance is killed with -9 mid-stream', async () => {
    const prefix = randomPrefix();
    prefixes.push(prefix);
    await killMidStream({ name: 'one server', env: { REDIS_URL: TEST_REDIS_URL }, reader: redis, prefix });
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
      // The fault starts at the 400th event and lasts 1.5 s; every one of the 20 senders is then
      // mid-delivery and retries until Redis is back (none can move on meanwhile), so the partition
      // meets a full load of deliveries whatever follows it: 600 more events, after, prove the
      // recovery.
      const sent = await stream({
        urls,
        businessId: BIZ,
        count: 1000,
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
      const counts = await effects(redis, `${prefix}:effects`, sent.length);
      console.log(
        `Redis partition mid-stream: answers by status ${JSON.stringify(Object.fromEntries(statuses))}`,
      );
      expect(statuses.get(503) ?? 0).toBeGreaterThan(0);
      expect(unrecorded).toBe(0);
      expect(counts).toHaveLength(1000);
      expect(counts.filter((n) => n !== 1)).toEqual([]);
    } finally {
      await proxy.close();
    }
  });
});

// The same promises on a Redis Cluster of the test's own (three masters on loopback ports), through
// ioredis' Cluster client: the tracked receiver's store and effects are on the cluster.
describe.sequential('several receiver processes sharing a Redis Cluster', { timeout: 120_000 }, () => {
  let cluster: RedisClusterProcess;
  let reader: Cluster;
  beforeAll(async () => {
    cluster = await startRedisCluster();
    reader = cluster.client({ redisOptions: { maxRetriesPerRequest: 1 } });
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });
  const backend = (prefix: string): Backend => ({
    name: 'Redis Cluster',
    env: { REDIS_CLUSTER_NODES: cluster.nodeList },
    reader,
    prefix,
  });

  it('processes each of 3,000 events exactly once over three processes (20% delivered twice, 10% to two at once)', async () => {
    const prefix = randomPrefix();
    const instances = await Promise.all(
      [1, 2, 3].map((n) =>
        startInstance(
          { ...backend(prefix).env, PAYHOOK_PREFIX: prefix, INSTANCE_NAME: `i${n}` },
          trackedReceiver,
        ),
      ),
    );
    const urls = instances.map((i) => `http://127.0.0.1:${i.port}/webhooks`);
    const sent = await stream({ urls, businessId: BIZ, count: 3000, parallel: 30 });
    const counts = await effects(reader, `{${prefix}}:effects`, sent.length);
    expect(counts).toHaveLength(3000);
    expect(counts.filter((n) => n !== 1)).toEqual([]);
    expect(Object.keys(await reader.hgetall(`{${prefix}}:runs-by`))).toHaveLength(3);
  });

  it('finishes every acknowledged event when an instance is killed with -9 mid-stream', async () => {
    await killMidStream(backend(randomPrefix()));
  });
});

async function killMidStream(backend: Backend): Promise<void> {
  const { reader: redis, prefix } = backend;
  const count = 1500;
  // The tracked receiver: the example's, whose handler also keeps the keys it has in flight in
  // `<prefix>:running:<pid>` (added as the handler starts, removed once the store has the outcome).
  const env = {
    ...backend.env,
    PAYHOOK_PREFIX: prefix,
    HANDLER_DELAY_MS: '40',
    LEASE_MS: '1500',
    RECOVERY_INTERVAL_MS: '300',
    CONCURRENCY: '10',
  };
  const instances = await Promise.all(
    [1, 2, 3].map((n) =>
      startInstance({ ...env, INSTANCE_NAME: `i${n}`, INSTANCE_ID: `${prefix}:i${n}` }, trackedReceiver),
    ),
  );
  const urls = instances.map((i) => `http://127.0.0.1:${i.port}/webhooks`);
  const victim = instances[0] as { child: ChildProcess; port: number };
  const running = `{${prefix}}:running:${victim.child.pid}`;
  const store = createRedisStore({ redis, prefix, checkPersistence: false });
  const acknowledged = new Set<string>();
  // Events the victim had started and not finished at the kill, still its own in the store.
  const held: string[] = [];
  let kill: Promise<string[]> | undefined;
  let restarted: Promise<unknown> | undefined;
  const sent = await stream({
    urls,
    businessId: BIZ,
    count,
    parallel: 30,
    onAnswer: (status: number, body: string) => {
      if (status === 200) acknowledged.add((JSON.parse(body) as { checksum: string }).checksum);
    },
    onProgress: (delivered: number) => {
      if (delivered < 500 || kill !== undefined) return;
      kill = (async () => {
        // Killed while handlers run: as soon as the victim has several in flight (one alone may
        // finish between this look and the signal), or one, if several never come together. In
        // flight means still `processing` in the store, not only in the running set: a handler
        // whose outcome is written leaves the set a round trip later, and a busy victim may be
        // killed with several such runs still listed and none left to finish.
        const since = Date.now();
        const processing = async () => {
          let n = 0;
          for (const key of await redis.smembers(running)) {
            const record = await store.get(key);
            if (record?.state === 'processing' && record.owner === `${prefix}:i1`) n++;
          }
          return n;
        };
        // Frozen (SIGSTOP) while it is looked at, so that the runs seen in flight are still in
        // flight at the kill: on a busy machine a look takes longer than a handler run.
        const frozenWithRunsInFlight = async (min: number) => {
          victim.child.kill('SIGSTOP');
          if ((await processing()) >= min) return true;
          victim.child.kill('SIGCONT');
          return false;
        };
        while (!(await frozenWithRunsInFlight(Date.now() - since < 3000 ? 3 : 1))) {
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
        victim.child.kill('SIGKILL');
        await once(victim.child, 'exit');
        // Started there and never recorded as finished: the handler runs in flight at the kill.
        const inFlight = await redis.smembers(running);
        // Read at once, before their leases lapse. A handler starts only once the event's 200 is
        // written, so these are events the victim acknowledged and had not finished.
        for (const key of inFlight) {
          const record = await store.get(key);
          if (record?.state === 'processing' && record.owner === `${prefix}:i1`) held.push(key);
        }
        // The same instance comes back on its port a moment later; until then its deliveries
        // fail and are sent again, as the service does.
        restarted = new Promise((resolve) => setTimeout(resolve, 800)).then(() =>
          startInstance(
            { ...env, INSTANCE_NAME: 'i1-restarted', PORT: String(victim.port) },
            trackedReceiver,
          ),
        );
        return inFlight;
      })();
    },
  });
  expect(kill).toBeDefined();
  const inFlight = await (kill as Promise<string[]>);
  await restarted;
  // ... and that the sender saw acknowledged.
  const unfinished = held.filter((key) => acknowledged.has(checksumOf(key)));

  // Every event ends done (those left in flight too, by a survivor or the restarted instance)
  // with its handler's effect.
  const counts = await effects(redis, `{${prefix}}:effects`, sent.length);
  for (const key of inFlight) {
    for (let i = 0; i < 600 && (await store.get(key))?.state !== 'done'; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  const final = await redis.hgetall(`{${prefix}}:effects`);
  const extra = Object.values(final).reduce((sum, n) => sum + Number(n), 0) - Object.keys(final).length;
  console.log(
    `kill -9 mid-stream (${backend.name}): ${count} events, all processed; ${inFlight.length} handler run(s) in flight at the kill ` +
      `(${unfinished.length} acknowledged and unfinished in the store); ${extra} handler run(s) beyond one per event`,
  );
  expect(counts).toHaveLength(count);
  expect(acknowledged.size).toBe(count);
  for (const checksum of acknowledged) expect(Number(final[checksum] ?? 0)).toBeGreaterThanOrEqual(1);
  for (const key of inFlight) expect((await store.get(key))?.state).toBe('done');
  expect(unfinished.length).toBeGreaterThanOrEqual(1);
  // Only a handler run in flight at the kill can run a second time.
  expect(extra).toBeLessThanOrEqual(inFlight.length);
}
