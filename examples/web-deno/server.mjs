import { createReceiver } from '@payhook/core';
import { logEvents, webReceiverOptions } from '@payhook/example-shared/web';
import { createRedisStore } from '@payhook/redis';
import { createWebHandler } from '@payhook/web';

let options;
try {
  options = webReceiverOptions(Deno.env.toObject());
} catch (error) {
  console.error(error.message);
  Deno.exit(2);
}
// REDIS_URL (optional): the idempotency store every instance shares, so that an event is handled
// once across all of them (REDIS_PREFIX: its keys' prefix). Without it, each process remembers
// what it handled in memory, which holds for one process only.
const redisUrl = Deno.env.get('REDIS_URL');
if (redisUrl)
  options.store = createRedisStore({ redis: redisUrl, prefix: Deno.env.get('REDIS_PREFIX') || undefined });
const receiver = createReceiver(options);
logEvents(receiver, 'deno');

// Deno.serve calls the handler with (request, info): the client address is info.remoteAddr.
const server = Deno.serve(
  {
    hostname: Deno.env.get('HOST') ?? '127.0.0.1',
    port: Number(Deno.env.get('PORT') ?? 3000),
    onListen: ({ hostname, port }) => console.log(`deno receiver on http://${hostname}:${port}/webhooks`),
  },
  createWebHandler(receiver, { path: '/webhooks' }),
);

const stop = async () => {
  await server.shutdown();
  await receiver.close(); // finishes the events already acknowledged
  await options.store?.close(); // a store passed in is the caller's to close
  Deno.exit(0);
};
Deno.addSignalListener('SIGTERM', stop);
Deno.addSignalListener('SIGINT', stop);
