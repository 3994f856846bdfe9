import { createReceiver } from '@payhook/core';
import { logEvents, port, receiverOptions } from '@payhook/example-shared';
import payhook from '@payhook/fastify';
import Fastify from 'fastify';

const receiver = createReceiver(receiverOptions());
logEvents(receiver, 'fastify');

const app = Fastify();
await app.register(payhook, { receiver, path: '/webhooks' });
app.get('/healthz', async () => ({ ok: true }));

await app.listen({ port: port(), host: '127.0.0.1' });
console.log(`fastify receiver on http://127.0.0.1:${port()}/webhooks`);
const stop = async () => {
  await app.close();
  await receiver.close();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
