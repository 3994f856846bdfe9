import { createReceiver, type Receiver, silentLogger } from '@payhook/core';
import { createTestEvent } from '@payhook/core/testing';
import Fastify from 'fastify';
import { afterEach, describe, expect, expectTypeOf, it } from 'vitest';
import payhook from '../src/index.js';

const BIZ = 'a9b8c7d6-e5f4-4a3b-8c2d-1e0f9a8b7c6d';
const apps: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

async function build(
  receiver = createReceiver({ businessIds: [BIZ], allowAnyIp: true, recoveryIntervalMs: 0 }),
) {
  const app = Fastify();
  apps.push(app, receiver);
  await app.register(payhook, { receiver, path: '/hooks/' });
  app.post('/orders', async (request) => ({ parsed: request.body }));
  return { app, receiver };
}

describe('@payhook/fastify plugin', () => {
  it('leaves the other routes with Fastify’s own JSON parser', async () => {
    const { app } = await build();
    const res = await app.inject({ method: 'POST', url: '/orders', payload: { a: 1 } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ parsed: { a: 1 } });
  });

  it('serves the path given with a trailing slash, with and without it', async () => {
    const { app } = await build();
    for (const url of ['/hooks', '/hooks/']) {
      const res = await app.inject({
        method: 'POST',
        url,
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify(createTestEvent('payment.session.created', BIZ)),
      });
      expect(res.statusCode, url).toBe(200);
    }
  });

  it('decorates the instance with the receiver, typed', async () => {
    const { app, receiver } = await build();
    expect(app.payhook).toBe(receiver);
    expectTypeOf(app.payhook).toEqualTypeOf<Receiver>();
  });

  it('answers 500 internal_error, not a client error, when the receiver itself fails', async () => {
    const receiver = createReceiver({
      businessIds: [BIZ],
      allowAnyIp: true,
      recoveryIntervalMs: 0,
      logger: silentLogger,
    });
    receiver.handle = async () => {
      throw new Error('bug');
    };
    const { app } = await build(receiver);
    const res = await app.inject({
      method: 'POST',
      url: '/hooks',
      headers: { 'content-type': 'application/json' },
      payload: '{}',
    });
    expect(res.statusCode).toBe(500);
    expect(res.json()).toMatchObject({ error: { code: 'internal_error' } });
  });

  it('refuses bad options at registration', async () => {
    await expect(Fastify().register(payhook, { receiver: {} as Receiver })).rejects.toThrow(/receiver/);
    const receiver = createReceiver({ businessIds: [BIZ], allowAnyIp: true, recoveryIntervalMs: 0 });
    await expect(Fastify().register(payhook, { receiver, path: 'hooks' })).rejects.toThrow(/path/);
  });
});
