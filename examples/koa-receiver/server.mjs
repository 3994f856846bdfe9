import { createReceiver } from '@payhook/core';
import { logEvents, port, receiverOptions } from '@payhook/example-shared';
import { payhook } from '@payhook/koa';
import Koa from 'koa';

const receiver = createReceiver(receiverOptions());
logEvents(receiver, 'koa');

const app = new Koa();
app.use(payhook(receiver, { path: '/webhooks' }));
app.use((ctx) => {
  if (ctx.path === '/healthz') ctx.body = { ok: true };
});

const server = app.listen(port(), () => console.log(`koa receiver on http://127.0.0.1:${port()}/webhooks`));
const stop = async () => {
  server.close();
  await receiver.close();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
