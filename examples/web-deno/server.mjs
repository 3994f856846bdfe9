import { createReceiver } from '@payhook/core';
import { logEvents, webReceiverOptions } from '@payhook/example-shared/web';
import { createWebHandler } from '@payhook/web';

let options;
try {
  options = webReceiverOptions(Deno.env.toObject());
} catch (error) {
  console.error(error.message);
  Deno.exit(2);
}
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
  Deno.exit(0);
};
Deno.addSignalListener('SIGTERM', stop);
Deno.addSignalListener('SIGINT', stop);
