/**
 * One server of the HTTP benchmark, in its own process so that the load generator does not share
 * its event loop: `tsx bench/http-server.ts <express|koa|fastify> <bare|payhook>`. Prints the port.
 *
 * The bare route of each framework is a JSON webhook endpoint without payhook: it reads the body,
 * parses it the framework's usual way and answers 200 (Express 5 with `express.json()`, Koa 3 with
 * the body read and parsed in the route, as @koa/bodyparser does, Fastify 5 with its own JSON
 * parser), so that every bare route handles the body the same way and each adapter is compared
 * with what the same endpoint costs without it. No other middleware on either side.
 *
 * A line `cpu` on stdin is answered with the process's CPU time so far (µs, user + system), so
 * that the runner can work out what each request cost the server, whatever the load generator
 * and the machine's neighbours took.
 */

import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { createReceiver } from '@payhook/core';
import { payhook as expressPayhook } from '@payhook/express';
import payhookFastify from '@payhook/fastify';
import { payhook as koaPayhook } from '@payhook/koa';
import express from 'express';
import Fastify from 'fastify';
import Koa from 'koa';

import { BENCH_BUSINESS_ID } from './lib.js';

const [framework, mode] = process.argv.slice(2);
const withPayhook = mode === 'payhook';
const receiver = createReceiver({
  businessIds: [BENCH_BUSINESS_ID],
  allowedIps: ['127.0.0.1'],
  recoveryIntervalMs: 0,
});
let handled = 0;
receiver.onAny(() => {
  handled++;
});
process.on('SIGTERM', () => {
  process.stdout.write(`${JSON.stringify({ handled })}\n`);
  process.exit(0);
});

/** The body of a request as text. */
function readBody(req: NodeJS.ReadableStream): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

async function listen(): Promise<number> {
  switch (framework) {
    case 'express': {
      const app = express();
      if (withPayhook) app.use('/webhooks', expressPayhook(receiver));
      else app.post('/webhooks', express.json(), (_req, res) => void res.json({ received: true }));
      const server = app.listen(0, '127.0.0.1');
      await new Promise((resolve) => server.once('listening', resolve));
      return (server.address() as AddressInfo).port;
    }
    case 'koa': {
      const app = new Koa();
      if (withPayhook) app.use(koaPayhook(receiver, { path: '/webhooks' }));
      else
        app.use(async (ctx) => {
          if (ctx.method !== 'POST' || ctx.path !== '/webhooks') return;
          JSON.parse(await readBody(ctx.req));
          ctx.body = { received: true };
        });
      const server = app.listen(0, '127.0.0.1');
      await new Promise((resolve) => server.once('listening', resolve));
      return (server.address() as AddressInfo).port;
    }
    case 'fastify': {
      const app = Fastify();
      if (withPayhook) await app.register(payhookFastify, { receiver, path: '/webhooks' });
      else app.post('/webhooks', async () => ({ received: true }));
      await app.listen({ port: 0, host: '127.0.0.1' });
      return (app.server.address() as AddressInfo).port;
    }
    default:
      throw new Error(`unknown framework ${framework}`);
  }
}

const port = await listen();
process.stdout.write(`${JSON.stringify({ port })}\n`);
createInterface({ input: process.stdin }).on('line', (line) => {
  if (line !== 'cpu') return;
  const { user, system } = process.cpuUsage();
  process.stdout.write(`${JSON.stringify({ cpuUs: user + system, handled })}\n`);
});
