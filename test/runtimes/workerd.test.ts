// @module-tag process
// @module-tag build
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestEvent } from '@payhook/core/testing';
import { describe, expect, it } from 'vitest';
import { BUSINESS_ID } from '../conformance/adapter-conformance.js';
import { freePort } from '../support/free-port.js';
import {
  describeRuntimeConformance,
  ROOT,
  type RuntimeServer,
  requireBinary,
  requireBuilt,
  spawnServer,
} from './runtime-conformance.js';

// examples/web-worker on workerd (the pinned miniflare package runs Cloudflare's workerd): the
// Worker bundled with esbuild for the browser platform, without nodejs_compat, so core verifies
// with Web Crypto; its idempotency store is the example's Durable Object. `node dev.mjs` runs it
// as a user runs it locally; Miniflare sets CF-Connecting-IP to the loopback client.
const example = `${ROOT}examples/web-worker`;
requireBinary(
  createRequire(`${example}/package.json`).resolve('miniflare'),
  'Miniflare (the miniflare package)',
);
requireBuilt();

async function start(env: Record<string, string>): Promise<RuntimeServer> {
  const port = await freePort();
  const server = await spawnServer(process.execPath, ['dev.mjs'], {
    cwd: example,
    env: { ...env, HOST: '127.0.0.1', PORT: String(port) },
    ready: /worker receiver on /,
  });
  return { ...server, url: `http://127.0.0.1:${port}` };
}

describeRuntimeConformance({
  name: 'worker',
  path: '/webhooks',
  trailingSlash: true,
  // Cloudflare's edge writes CF-Connecting-IP over whatever the client sent; Miniflare's local
  // server keeps a client's own. The rows play the edge, after their own headers.
  edgeHeaders: { 'cf-connecting-ip': '127.0.0.1' },
  // Miniflare's local server closes the connection once the 413 is sent, body bytes unread.
  resetsUnreadBody: true,
  start,
});

describe('worker: exactly once through the Durable Object', () => {
  it('refuses as a duplicate an event handled by an earlier Worker whose isolate is gone', async () => {
    const persist = await mkdtemp(join(tmpdir(), 'payhook-worker-'));
    const env = { BUSINESS_ID, ALLOWED_IPS: '127.0.0.1', PERSIST_DIR: persist };
    const event = createTestEvent('payment.session.succeeded', BUSINESS_ID);
    const post = (url: string) =>
      fetch(`${url}/webhooks`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(event),
      }).then((res) => res.json());
    try {
      const first = await start(env);
      try {
        expect(await post(first.url)).toEqual({ received: true });
        for (let i = 0; i < 500 && !first.output().includes(`payment=${event.data.id}`); i++) {
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        expect(first.output()).toContain(`payment=${event.data.id}`);
      } finally {
        await first.close();
      }
      // A new workerd process: no isolate memory survives, only the Durable Object's storage.
      const second = await start(env);
      try {
        expect(await post(second.url)).toEqual({ received: true, duplicate: true });
        await new Promise((resolve) => setTimeout(resolve, 200));
        expect(second.output()).not.toContain(`payment=${event.data.id}`);
      } finally {
        await second.close();
      }
    } finally {
      await rm(persist, { recursive: true, force: true });
    }
  });
});
