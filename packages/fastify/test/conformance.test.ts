import type { Receiver } from '@payhook/core';
import Fastify from 'fastify';
import {
  type AdapterHarness,
  describeAdapterConformance,
} from '../../../test/conformance/adapter-conformance.js';
import payhook from '../src/index.js';

const harness: AdapterHarness = {
  // The plugin's route has its own encapsulated parser: Fastify's JSON parser never runs on it.
  modes: ['raw'],
  async start(receiver: Receiver, { host, parserLimitBytes }) {
    const app = Fastify({ bodyLimit: parserLimitBytes });
    await app.register(payhook, { receiver, path: '/webhooks' });
    app.post('/other', async (request) => ({ parsed: request.body }));
    const url = await app.listen({ port: 0, host });
    return { url, close: () => app.close() };
  },
};

describeAdapterConformance('fastify 5', harness);
