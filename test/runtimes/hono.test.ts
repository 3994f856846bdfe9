// @module-tag process
// @module-tag build
import { describe, expect, it } from 'vitest';
import { freePort } from '../support/free-port.js';
import {
  describeRuntimeConformance,
  ROOT,
  type RuntimeServer,
  requireBuilt,
  spawnServer,
} from './runtime-conformance.js';

// examples/web-hono/server.mjs on this Node (scripts/test-on-node.sh runs it on 22 and 24 too):
// a Hono app served by @hono/node-server, the handler mounted with `webhook(c.req.raw, c)`.
requireBuilt();

async function start(env: Record<string, string>): Promise<RuntimeServer> {
  const port = await freePort();
  const server = await spawnServer(process.execPath, ['server.mjs'], {
    cwd: `${ROOT}examples/web-hono`,
    env: { ...env, HOST: '127.0.0.1', PORT: String(port) },
    ready: /hono receiver on /,
  });
  return { ...server, url: `http://127.0.0.1:${port}` };
}

describeRuntimeConformance({
  name: 'hono',
  path: '/webhooks',
  trailingSlash: true,
  start,
});

describe('hono: the example without its settings', () => {
  it('refuses to start, exiting 2 with a message that names them', async () => {
    await expect(start({ BUSINESS_ID: '', ALLOWED_IPS: '' })).rejects.toThrow(
      /did not start \(2\)[\s\S]*BUSINESS_ID/,
    );
  });
});
