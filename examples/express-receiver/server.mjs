import { createReceiver } from '@payhook/core';
import { logEvents, port, receiverOptions } from '@payhook/example-shared';
import { payhook } from '@payhook/express';
import express from 'express';

const receiver = createReceiver(receiverOptions());
logEvents(receiver, 'express');

const app = express();
// Before any body parser, so the raw body is verified (lexical canonicalization, duplicate keys).
app.use('/webhooks', payhook(receiver));
app.use(express.json());
app.get('/healthz', (_req, res) => res.json({ ok: true }));

const server = app.listen(port(), () =>
  console.log(`express receiver on http://127.0.0.1:${port()}/webhooks`),
);
const stop = async () => {
  server.close();
  await receiver.close(); // finishes the events already acknowledged
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
