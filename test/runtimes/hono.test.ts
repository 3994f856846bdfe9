// @module-tag process
// @module-tag build
import { freePort } from '../support/free-port.js';
import { describeRuntimeConformance, ROOT, requireBuilt, spawnServer } from './runtime-conformance.js';

// examples/web-hono/server.mjs on this Node (scripts/test-on-node.sh runs it on 22 and 24 too):
// a Hono app served by @hono/node-server, the handler mounted with `webhook(c.req.raw, c)`.
requireBuilt();

describeRuntimeConformance({
  name: 'hono',
  path: '/webhooks',
  trailingSlash: true,
  async start(env) {
    const port = await freePort();
    const server = await spawnServer(process.execPath, ['server.mjs'], {
      cwd: `${ROOT}examples/web-hono`,
      env: { ...env, HOST: '127.0.0.1', PORT: String(port) },
      ready: /hono receiver on /,
    });
    return { ...server, url: `http://127.0.0.1:${port}` };
  },
});
