import { createReceiver } from '@payhook/core';
import { logEvents, webReceiverOptions } from '@payhook/example-shared/web';
import { createWebHandler } from '@payhook/web';

let options;
try {
  options = webReceiverOptions(Bun.env);
} catch (error) {
  console.error(error.message);
  process.exit(2);
}
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
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
