import { serve } from '@hono/node-server';
import { createReceiver } from '@payhook/core';
import { logEvents, webReceiverOptions } from '@payhook/example-shared/web';
import { createWebHandler } from '@payhook/web';
import { Hono } from 'hono';

let options;
try {
  options = webReceiverOptions(process.env);
} catch (error) {
  console.error(error.message);
  process.exit(2);
}
const receiver = createReceiver(options);
logEvents(receiver, 'hono');
const webhook = createWebHandler(receiver);

// strict: false also routes /webhooks/. Passing `c` lets the handler find the client address
// (the socket, through @hono/node-server) and, on Workers, c.executionCtx.waitUntil.
const app = new Hono({ strict: false });
app.all('/webhooks', (c) => webhook(c.req.raw, c));
app.get('/healthz', (c) => c.json({ ok: true }));

const port = Number(process.env.PORT ?? 3000);
const server = serve({ fetch: app.fetch, hostname: process.env.HOST ?? '127.0.0.1', port }, (info) =>
  console.log(`hono receiver on http://${info.address}:${info.port}/webhooks`),
);
const stop = async () => {
  server.close();
  await receiver.close(); // finishes the events already acknowledged
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
