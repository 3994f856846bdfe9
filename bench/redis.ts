/**
 * pnpm bench:redis — accepted events per second through the Redis store (claim + complete) from
 * one process against the local Redis, round trips per event (the store's command counter), and
 * Redis memory per retained event (the tombstone kept for duplicates and replays).
 */
import { randomBytes } from 'node:crypto';
import { createRedisStore } from '@payhook/redis';
import { Redis } from 'ioredis';
import { printTable, writeResults } from './lib.js';

const url = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const redis = new Redis(url);
const prefix = `payhook-bench:${randomBytes(4).toString('hex')}`;
const store = createRedisStore({ redis, prefix });
const EVENTS = Number(process.env.BENCH_EVENTS ?? 50_000);
const IN_FLIGHT = 64; // events at once, as a receiver with several requests and handlers running
const business = '9c4a2b1e-7d3f-4e8a-b5c6-1a2b3c4d5e6f';
const payload = JSON.stringify({
  event: 'payment.session.succeeded',
  data: { pad: 'x'.repeat(900) },
  checksum: 'c'.repeat(64),
});
const keys = Array.from({ length: EVENTS }, () => `${business}:${randomBytes(32).toString('hex')}`);

// Warm up: script loading and the business's entry in the set of tags.
await store.claim(`${business}:warm`, { owner: 'bench', leaseMs: 30_000, payload, businessId: business });

const used = async () => Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1]);
const memoryBefore = await used();
const commandsBefore = store.commandCount;
const started = process.hrtime.bigint();
let next = 0;
await Promise.all(
  Array.from({ length: IN_FLIGHT }, async () => {
    while (next < keys.length) {
      const key = keys[next++] as string;
      const claim = await store.claim(key, {
        owner: 'bench',
        leaseMs: 30_000,
        payload,
        businessId: business,
      });
      if (claim.status !== 'claimed') throw new Error(`unexpected ${claim.status}`);
      if (!(await store.complete(key, 'bench'))) throw new Error('complete refused');
    }
  }),
);
const seconds = Number(process.hrtime.bigint() - started) / 1e9;
const roundTrips = (store.commandCount - commandsBefore) / EVENTS;
const perEvent = ((await used()) - memoryBefore) / EVENTS;
const sample = await redis.memory('USAGE', `{${prefix}:${business}}:e:${(keys[0] as string).split(':')[1]}`);

const results = {
  events: EVENTS,
  eventsPerSecond: Math.round(EVENTS / seconds),
  roundTripsPerEvent: roundTrips,
  bytesPerRetainedEvent: Math.round(perEvent),
  memoryUsageOfOneTombstone: sample,
};
printTable(
  ['events', 'accepted/s', 'round trips/event', 'bytes/retained event', 'MEMORY USAGE of one'],
  [
    [
      String(EVENTS),
      results.eventsPerSecond.toLocaleString('en-US'),
      roundTrips.toFixed(2),
      String(results.bytesPerRetainedEvent),
      String(sample),
    ],
  ],
);
console.log(`\nresults written to ${writeResults('redis', results).replace(process.cwd(), '.')}`);
const failures = [];
if (roundTrips > 2) failures.push(`${roundTrips} round trips per event (target at most 2)`);
if (results.eventsPerSecond < 10_000) failures.push(`${results.eventsPerSecond} events/s (target 10,000)`);
if (failures.length > 0) console.log(`\nbelow target:\n${failures.join('\n')}`);

let cursor = '0';
do {
  const [nextCursor, found] = await redis.scan(cursor, 'MATCH', `*${prefix}*`, 'COUNT', 1000);
  cursor = nextCursor;
  if (found.length > 0) await redis.del(...found);
} while (cursor !== '0');
redis.disconnect();
