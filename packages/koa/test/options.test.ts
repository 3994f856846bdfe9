import type { AddressInfo } from 'node:net';
import Router from '@koa/router';
import { createReceiver } from '@payhook/core';
import { createTestEvent } from '@payhook/core/testing';
import Koa from 'koa';
import { describe, expect, it } from 'vitest';
import { payhook } from '../src/index.js';

const BIZ = 'b1a2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d';

describe('@payhook/koa options', () => {
  it('refuses a path that does not start with a slash', () => {
    const receiver = createReceiver({ businessIds: [BIZ], allowAnyIp: true, recoveryIntervalMs: 0 });
    expect(() => payhook(receiver, { path: 'webhooks' })).toThrow(TypeError);
  });

  it('with path: false, serves whatever route a router mounts it on', async () => {
    const receiver = createReceiver({ businessIds: [BIZ], allowedIps: ['127.0.0.1'], recoveryIntervalMs: 0 });
    const seen: string[] = [];
    receiver.onAny((event) => {
      seen.push(event.event);
    });
    const router = new Router();
    router.all('/hooks/payments', payhook(receiver, { path: false }));
    const app = new Koa();
    app.use(router.routes());
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/payments`;
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(createTestEvent('payment.session.created', BIZ)),
      });
      expect(res.status).toBe(200);
      expect((await fetch(url)).status).toBe(405);
      await receiver.close();
      expect(seen).toEqual(['payment.session.created']);
    } finally {
      server.close();
    }
  });
  it('the errors boundary leaves errors on other paths to Koa', async () => {
    const receiver = createReceiver({ businessIds: [BIZ], allowedIps: ['127.0.0.1'], recoveryIntervalMs: 0 });
    const webhooks = payhook(receiver, { path: '/webhooks' });
    const app = new Koa();
    app.silent = true;
    app.use(webhooks.errors);
    app.use((ctx) => ctx.throw(418, 'teapot'));
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const other = await fetch(`${base}/other`);
      expect(other.status).toBe(418);
      expect(await other.text()).toBe('teapot');
      const hook = await fetch(`${base}/webhooks/`, { method: 'POST' });
      expect(hook.status).toBe(418);
      expect(((await hook.json()) as { error: { code: string } }).error.code).toBe('malformed_payload');
    } finally {
      server.close();
      await receiver.close();
    }
  });
});
