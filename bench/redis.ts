/**
 * pnpm bench:redis — accepted events per second through the Redis store (claim + complete) from
 * one process, round trips per event (the store's command counter), and Redis memory per retained
 * event (the tombstone kept for duplicates and replays), for each durability a deployment can pick,
 * side by side in one run:
 * - default: a Redis without an append-only file (Redis's default; a restart loses what it holds);
 * - AOF everysec: `appendonly yes`, `appendfsync everysec` (a crash of the Redis host loses about a
 *   second of acknowledgements);
 * - AOF always: `appendfsync always` (each write on disk before Redis answers: nothing acknowledged
 *   is lost);
 * - replicas: a primary (no AOF) and one replica, the store with `durability: 'replicas'` (each
 *   claim confirmed by `WAIT 1` before it is acknowledged);
 * - Redis Cluster: three masters (no AOF) through ioredis' Cluster client;
 * - per-payment order: the default server, each event also taking its payment's lock and
 *   completing through the order (claim, lock, ordered complete), as a receiver with order on
 *   does; each event a payment of its own, so bytes/retained event count one payment record each.
 * The events belong to BUSINESSES businesses in turn (a business's keys share one slot, so on the
 * cluster they spread over the masters by business).
 * Each is a `redis-server` of the benchmark's own on a loopback port and a temporary directory
 * (never the shared server), `IN_FLIGHT` events at once, as a receiver with several requests and
 * handlers running. Target (default): at most 2 round trips per event and 10,000 events/s.
 */
import { randomBytes } from 'node:crypto';
import { createRedisStore } from '@payhook/redis';
import { type Cluster, Redis } from 'ioredis';
import { startRedisCluster } from '../test/support/redis-cluster.js';
import { type RedisServerOptions, startRedisServer } from '../test/support/redis-server.js';
import { printTable, writeResults } from './lib.js';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 50_000);
const IN_FLIGHT = 64;
const BUSINESSES = 12;
const businesses = Array.from(
  { length: BUSINESSES },
  (_, i) => `9c4a2b1e-7d3f-4e8a-b5c6-${String(i).padStart(12, '0')}`,
);
const payload = JSON.stringify({
  event: 'payment.session.succeeded',
  data: { pad: 'x'.repeat(900) },
  checksum: 'c'.repeat(64),
});

interface Row {
  eventsPerSecond: number;
  roundTripsPerEvent: number;
  bytesPerRetainedEvent: number;
  memoryUsageOfOneTombstone: number | null;
}

type Setup = {
  name: string;
  server: RedisServerOptions;
  replica?: boolean;
  cluster?: boolean;
  ordered?: boolean;
};
const SETUPS: Setup[] = [
  { name: 'default (no AOF)', server: {} },
  { name: 'AOF everysec', server: { appendfsync: 'everysec' } },
  { name: 'AOF always', server: { appendfsync: 'always' } },
  { name: 'replicas (WAIT 1)', server: {}, replica: true },
  { name: 'Redis Cluster (3 masters)', server: {}, cluster: true },
  { name: 'per-payment order (no AOF)', server: {}, ordered: true },
];

async function measure(setup: Setup): Promise<Row> {
  const stops: (() => Promise<void>)[] = [];
  try {
    let redis: Redis | Cluster;
    // The servers whose memory the events take: the one server, or the cluster's masters.
    let servers: () => Redis[];
    if (setup.cluster) {
      const cluster = await startRedisCluster();
      stops.push(() => cluster.stop());
      const client = cluster.client();
      redis = client;
      servers = () => client.nodes('master');
    } else {
      const primary = await startRedisServer(setup.server);
      stops.push(() => primary.destroy());
      if (setup.replica) {
        const replica = await startRedisServer({ replicaOf: primary });
        stops.unshift(() => replica.destroy());
        await linked(replica.port);
      }
      const client = new Redis(primary.url);
      stops.unshift(async () => client.disconnect());
      redis = client;
      servers = () => [client];
    }
    const prefix = `payhook-bench:${randomBytes(4).toString('hex')}`;
    const store = createRedisStore({
      redis,
      prefix,
      checkPersistence: false,
      ...(setup.replica ? { durability: 'replicas' as const, replicas: 1 } : {}),
    });
    const events = Array.from({ length: EVENTS }, (_, i) => {
      const businessId = businesses[i % BUSINESSES] as string;
      return { businessId, key: `${businessId}:${randomBytes(32).toString('hex')}` };
    });
    // Warm up: script loading and each business's entry in the set of tags.
    for (const businessId of businesses) {
      await store.claim(`${businessId}:warm`, { owner: 'bench', leaseMs: 30_000, payload, businessId });
    }
    const used = async () => {
      let total = 0;
      for (const server of servers())
        total += Number(/used_memory:(\d+)/.exec(await server.info('memory'))?.[1]);
      return total;
    };
    const memoryBefore = await used();
    const commandsBefore = store.commandCount;
    const started = process.hrtime.bigint();
    let next = 0;
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (next < events.length) {
          const { businessId, key } = events[next++] as { businessId: string; key: string };
          const claim = await store.claim(key, { owner: 'bench', leaseMs: 30_000, payload, businessId });
          if (claim.status !== 'claimed') throw new Error(`unexpected ${claim.status}`);
          if (setup.ordered) {
            const lock = await store.order.lock(key, 'bench', key);
            if (lock.status !== 'locked') throw new Error(`lock ${lock.status}`);
            if (!(await store.order.complete(key, 'bench', key, 20))) throw new Error('complete refused');
          } else if (!(await store.complete(key, 'bench'))) throw new Error('complete refused');
        }
      }),
    );
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const first = events[0] as { businessId: string; key: string };
    const tombstone = `{${prefix}:${first.businessId}}:e:${first.key.split(':')[1]}`;
    let usage: number | null = null;
    // On a cluster, the master that serves the key's slot answers; the others redirect (MOVED).
    for (const server of servers()) usage ??= await server.memory('USAGE', tombstone).catch(() => null);
    return {
      eventsPerSecond: Math.round(EVENTS / seconds),
      roundTripsPerEvent: (store.commandCount - commandsBefore) / EVENTS,
      bytesPerRetainedEvent: Math.round(((await used()) - memoryBefore) / EVENTS),
      memoryUsageOfOneTombstone: usage,
    };
  } finally {
    for (const stop of stops) await stop();
  }
}

async function linked(port: number): Promise<void> {
  const replica = new Redis(port, '127.0.0.1');
  try {
    for (let i = 0; i < 200; i++) {
      if ((await replica.info('replication')).includes('master_link_status:up')) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error('the replica did not link to its primary');
  } finally {
    replica.disconnect();
  }
}

const results: Record<string, Row> = {};
for (const setup of SETUPS) {
  results[setup.name] = await measure(setup);
  console.log(`${setup.name}: ${results[setup.name]?.eventsPerSecond.toLocaleString('en-US')} events/s`);
}
const base = results[SETUPS[0]?.name as string] as Row;
console.log();
printTable(
  [
    'durability',
    'accepted/s',
    'x default',
    'round trips/event',
    'bytes/retained event',
    'MEMORY USAGE of one',
  ],
  SETUPS.map(({ name }) => {
    const r = results[name] as Row;
    return [
      name,
      r.eventsPerSecond.toLocaleString('en-US'),
      (r.eventsPerSecond / base.eventsPerSecond).toFixed(2),
      r.roundTripsPerEvent.toFixed(2),
      String(r.bytesPerRetainedEvent),
      String(r.memoryUsageOfOneTombstone),
    ];
  }),
);
console.log(
  `\nresults written to ${writeResults('redis', { events: EVENTS, ...results }).replace(process.cwd(), '.')}`,
);
const failures = [];
if (base.roundTripsPerEvent > 2)
  failures.push(`${base.roundTripsPerEvent} round trips per event (target at most 2)`);
if (base.eventsPerSecond < 10_000) failures.push(`${base.eventsPerSecond} events/s (target 10,000)`);
if (failures.length > 0) console.log(`\nbelow target:\n${failures.join('\n')}`);
