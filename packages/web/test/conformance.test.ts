import { createServer } from 'node:http';
import { getRequestListener, serve } from '@hono/node-server';
import type { Receiver } from '@payhook/core';
import { Hono } from 'hono';
import {
  type AdapterHarness,
  describeAdapterConformance,
  runningApp,
} from '../../../test/conformance/adapter-conformance.js';
import { createWebHandler, webhookErrorResponse } from '../src/index.js';

// The handler reads the raw body itself: there is no "after the body parser" mounting.
const modes = ['raw'] as const;

/** Hono on Node through @hono/node-server, the handler on a route: `(c) => handler(c.req.raw, c)`. */
const hono: AdapterHarness = {
  modes,
  async start(receiver: Receiver, { host, failBefore }) {
    const handler = createWebHandler(receiver);
    const app = new Hono();
    if (failBefore) {
      app.use('/webhooks/*', () => {
        throw failBefore;
      });
      app.use('/webhooks', () => {
        throw failBefore;
      });
    }
    app.all('/webhooks', (c) => handler(c.req.raw, c));
    app.all('/webhooks/', (c) => handler(c.req.raw, c));
    app.get('/health', (c) => c.text('ok'));
    app.onError((error, c) =>
      c.req.path.startsWith('/webhooks') ? webhookErrorResponse(receiver, error) : c.text('error', 500),
    );
    const server = serve({ fetch: app.fetch, port: 0, hostname: host });
    return runningApp(server as ReturnType<typeof createServer>, host);
  },
};

/** Plain Node: http.createServer with @hono/node-server's Request bridge, the handler given the path. */
const plain: AdapterHarness = {
  modes,
  async start(receiver: Receiver, { host, failBefore }) {
    const handler = createWebHandler(receiver, { path: '/webhooks' });
    const fetchHandler = failBefore
      ? async () => webhookErrorResponse(receiver, failBefore)
      : (request: Request, env: unknown) => handler(request, env);
    const server = createServer(getRequestListener(fetchHandler)).listen(0, host);
    return runningApp(server, host);
  },
};

describeAdapterConformance('web (Hono on @hono/node-server)', hono);
describeAdapterConformance('web (node:http, getRequestListener)', plain);
