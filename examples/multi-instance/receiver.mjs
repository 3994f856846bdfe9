// One receiver instance of several behind a load balancer, sharing one Redis. Its handler's
// effect is a counter per event in Redis, so running instances side by side shows each event
// processed once. Configuration: REDIS_URL (required), PORT, BUSINESS_ID, ALLOWED_IPS,
// PAYHOOK_PREFIX, HANDLER_DELAY_MS, LEASE_MS, RECOVERY_INTERVAL_MS, CONCURRENCY, EFFECTS_REDIS_URL.
import { createReceiver } from '@payhook/core';
import { payhook } from '@payhook/express';
import { createRedisStore } from '@payhook/redis';
import express from 'express';
import { Redis } from 'ioredis';

const env = process.env;
if (!env.REDIS_URL) {
  console.error('Set REDIS_URL, the Redis every instance shares.');
  process.exit(2);
}
const prefix = env.PAYHOOK_PREFIX ?? 'payhook:example';
const delay = Number(env.HANDLER_DELAY_MS ?? 0);
const name = env.INSTANCE_NAME ?? `:${env.PORT ?? 3000}`;

const store = createRedisStore({
  redis: env.REDIS_URL,
  prefix,
  commandTimeoutMs: Number(env.COMMAND_TIMEOUT_MS ?? 1000),
});
// The handler's own connection, for its effect (a merchant's database, in real life; its own
// server too, so EFFECTS_REDIS_URL may differ from the store's REDIS_URL).
const effects = new Redis(env.EFFECTS_REDIS_URL ?? env.REDIS_URL, { maxRetriesPerRequest: null });
effects.on('error', () => {}); // it reconnects by itself; the handler's command waits meanwhile
const receiver = createReceiver({
  businessIds: [env.BUSINESS_ID ?? 'c5a1f3e2-8b7d-4c6e-9f0a-1b2c3d4e5f60'],
  allowedIps: (env.ALLOWED_IPS ?? '127.0.0.1,::1').split(','),
  store,
  leaseMs: Number(env.LEASE_MS ?? 30_000),
  recoveryIntervalMs: Number(env.RECOVERY_INTERVAL_MS ?? 10_000),
  concurrency: Number(env.CONCURRENCY ?? 10),
});
receiver.onAny(async (event) => {
  if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
  await effects.hincrby(`${prefix}:effects`, event.checksum, 1);
  await effects.hincrby(`${prefix}:runs-by`, name, 1);
});
receiver.onError((error, info) => {
  // Store and recovery errors are expected while Redis is away (requests get 503 meanwhile).
  if (info.phase === 'handler') console.error(`[${name}] ${info.phase}: ${error}`);
});

const app = express();
app.use('/webhooks', payhook(receiver));
const server = app.listen(Number(env.PORT ?? 3000), '127.0.0.1', () => {
  console.log(`ready ${server.address().port}`);
});
const stop = async () => {
  server.close();
  await receiver.close();
  await store.close();
  effects.disconnect();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
