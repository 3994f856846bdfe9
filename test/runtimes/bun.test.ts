// @module-tag process
// @module-tag build
import { freePort } from '../support/free-port.js';
import {
  describeRuntimeConformance,
  ROOT,
  requireBinary,
  requireBuilt,
  spawnServer,
} from './runtime-conformance.js';

// examples/web-bun/server.mjs on Bun (the pinned `bun` package), as `bun server.mjs` runs it:
// Bun.serve with @payhook/web's handler, the built packages.
const bun = requireBinary(`${ROOT}node_modules/.bin/bun`, 'Bun (the bun package)');
requireBuilt();

describeRuntimeConformance({
  name: 'bun',
  path: '/webhooks',
  trailingSlash: true,
  // Bun closes the connection once the 413 is sent, while the client may still be writing.
  resetsUnreadBody: true,
  async start(env) {
    const port = await freePort();
    const server = await spawnServer(bun, ['server.mjs'], {
      cwd: `${ROOT}examples/web-bun`,
      env: { ...env, HOST: '127.0.0.1', PORT: String(port) },
      ready: /bun receiver on /,
    });
    return { ...server, url: `http://127.0.0.1:${port}` };
  },
});
