import { createServer, type Server } from 'node:http';
import { createRequire } from 'node:module';
import { getRequestListener, serve } from '@hono/node-server';
import type { Receiver } from '@payhook/core';
import { payhook as expressPayhook, type PayhookMiddleware } from '@payhook/express';
import payhookFastify, { type PayhookFastifyOptions } from '@payhook/fastify';
import { payhook as koaPayhook, type PayhookKoaMiddleware } from '@payhook/koa';
import { createWebHandler } from '@payhook/web';
import { Hono } from 'hono';
import { runningApp } from '../conformance/adapter-conformance.js';

// The frameworks are dev dependencies of their adapter packages, not of the workspace root: load
// each from its adapter's directory, as that adapter's own tests import it. The few members used
// here are typed locally (their type packages do not resolve from this directory either).
const fromPackage = (pkg: string) =>
  createRequire(new URL(`../../packages/${pkg}/package.json`, import.meta.url));
const withDefault = <T>(mod: T | { default: T }): T =>
  typeof mod === 'object' && mod !== null && 'default' in mod ? mod.default : (mod as T);

type ExpressFactory = () => {
  use(path: string, handler: PayhookMiddleware): unknown;
  listen(port: number, host: string): Server;
};
type KoaClass = new () => {
  silent: boolean;
  use(middleware: PayhookKoaMiddleware): unknown;
  listen(port: number, host: string): Server;
};
type FastifyFactory = () => {
  register(plugin: typeof payhookFastify, options: PayhookFastifyOptions): PromiseLike<unknown>;
  listen(options: { port: number; host: string }): Promise<string>;
  close(): Promise<void>;
};

const HOST = '127.0.0.1';

/** A framework app with a payhook adapter mounted at /webhooks, started on loopback. */
export interface AdapterApp {
  name: string;
  start(receiver: Receiver): Promise<{ url: string; close(): Promise<void> }>;
}

/**
 * A payhook receiver mounted with each adapter on each framework major the workspace tests:
 * Express 5 and 4, Koa 3 and 2, Fastify 5, and the Web-standard handler under Hono and under
 * Node's own HTTP server (both through `@hono/node-server`). `start` listens on 127.0.0.1, port 0.
 */
export const ADAPTER_APPS: AdapterApp[] = [
  ...(
    [
      ['express 5', 'express'],
      ['express 4', 'express4'],
    ] as const
  ).map(([name, id]) => ({
    name,
    async start(receiver: Receiver) {
      const express = withDefault(fromPackage('express')(id) as ExpressFactory);
      const app = express();
      app.use('/webhooks', expressPayhook(receiver));
      return runningApp(app.listen(0, HOST), HOST);
    },
  })),
  ...(
    [
      ['koa 3', 'koa'],
      ['koa 2', 'koa2'],
    ] as const
  ).map(([name, id]) => ({
    name,
    async start(receiver: Receiver) {
      const Koa = withDefault(fromPackage('koa')(id) as KoaClass);
      const app = new Koa();
      app.silent = true;
      app.use(koaPayhook(receiver, { path: '/webhooks' }));
      return runningApp(app.listen(0, HOST), HOST);
    },
  })),
  {
    name: 'fastify 5',
    async start(receiver: Receiver) {
      const Fastify = withDefault(fromPackage('fastify')('fastify') as FastifyFactory);
      const app = Fastify();
      await app.register(payhookFastify, { receiver, path: '/webhooks' });
      const url = await app.listen({ port: 0, host: HOST });
      return { url, close: () => app.close() };
    },
  },
  {
    name: 'web (Hono)',
    async start(receiver: Receiver) {
      const handler = createWebHandler(receiver);
      const app = new Hono();
      app.all('/webhooks', (c) => handler(c.req.raw, c));
      app.all('/webhooks/', (c) => handler(c.req.raw, c));
      return runningApp(
        serve({ fetch: app.fetch, port: 0, hostname: HOST, overrideGlobalObjects: false }) as Server,
        HOST,
      );
    },
  },
  {
    name: 'web (node:http)',
    async start(receiver: Receiver) {
      const handler = createWebHandler(receiver, { path: '/webhooks' });
      return runningApp(
        createServer(getRequestListener(handler, { overrideGlobalObjects: false })).listen(0, HOST),
        HOST,
      );
    },
  },
];
