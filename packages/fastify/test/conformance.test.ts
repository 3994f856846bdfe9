import type { Receiver } from '@payhook/core';
import Fastify from 'fastify';
import {
  type AdapterHarness,
  describeAdapterConformance,
} from '../../../test/conformance/adapter-conformance.js';
import payhook from '../src/index.js';

const harness: AdapterHarness = {
  // Raw only: the plugin registers its route with its own encapsulated content-type parser that
  // keeps the raw body, so Fastify's JSON parser never runs on it and there is no "mounted after
  // the body parser" mode to test (other routes keep Fastify's parser, see plugin.test.ts).
  modes: ['raw'],
  async start(receiver: Receiver, { host, parserLimitBytes, failBefore }) {
    const app = Fastify({ bodyLimit: parserLimitBytes });
    if (failBefore) {
      app.addHook('onRequest', async () => {
        throw failBefore;
      });
    }
    await app.register(payhook, { receiver, path: '/webhooks' });
    app.post('/other', async (request) => ({ parsed: request.body }));
    const url = await app.listen({ port: 0, host });
    return { url, close: () => app.close() };
  },
};

describeAdapterConformance('fastify 5', harness);
