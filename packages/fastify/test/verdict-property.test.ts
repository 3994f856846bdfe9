import Fastify from 'fastify';
import { describeVerdictProperty } from '../../../test/conformance/verdict-property.js';
import payhook from '../src/index.js';

describeVerdictProperty('fastify 5', async (receiver) => {
  const app = Fastify();
  await app.register(payhook, { receiver, path: '/webhooks' });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  return { url, close: () => app.close() };
});
