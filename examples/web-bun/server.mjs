import { createReceiver } from '@payhook/core';
import { logEvents, webReceiverOptions } from '@payhook/example-shared/web';
import { createRedisStore } from '@payhook/redis';
import { createWebHandler } from '@payhook/web';

let options;
try {
  options = webReceiverOptions(Bun.env);
} catch (error) {
  console.error(error.message);
  process.exit(2);
}
// REDIS_URL (optional): the idempotency store every instance shares, so that an event is handled
// once across all of them (REDIS_PREFIX: its keys' prefix). Without it, each process remembers
// what it handled in memory, which holds for one process only.
const redisUrl = Bun.env.REDIS_URL;
if (redisUrl)
  options.store = createRedisStore({ redis: redisUrl, prefix: Bun.env.REDIS_PREFIX || undefined });
const receiver = createReceiver(options);
logEvents(receiver, 'bun');

// Bun.serve calls fetch(request, server): the handler asks the server for the client address.
const server = Bun.serve({
  hostname: Bun.env.HOST ?? '127.0.0.1',
  port: Number(Bun.env.PORT ?? 3000),
  fetch: createWebHandler(receiver, { path: '/webhooks' }),
});
console.log(`bun receiver on ${server.url}webhooks`);

const stop = async () => {
  await server.stop();
  await receiver.close(); // finishes the events already acknowledged
  await options.store?.close(); // a store passed in is the caller's to close
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
