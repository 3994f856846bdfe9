// @module-tag process
// @module-tag build
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createTestEvent } from '@payhook/core/testing';
import { beforeAll, describe, expect, it } from 'vitest';
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

// examples/web-nextjs, an App Router app (app/api/webhooks/route.js), built with `next build` and
// served with `next start` on this Node (scripts/test-on-node.sh runs it on 22 and 24 too).
const app = `${ROOT}examples/web-nextjs`;
const next = requireBinary(
  createRequire(`${app}/package.json`).resolve('next/dist/bin/next'),
  'Next.js (the next package)',
);
requireBuilt();
const env = { NEXT_TELEMETRY_DISABLED: '1' };

// What `next build` reads: the app, the shared example code and the built packages it bundles.
const BUILD_INPUTS = [app, `${ROOT}examples/shared`, `${ROOT}packages/core/dist`, `${ROOT}packages/web/dist`];
const BUILT_FROM = join(app, '.next/payhook-built-from');

async function hashInputs(): Promise<string> {
  // next's path names its version (node_modules/.pnpm/next@x.y.z...).
  const hash = createHash('sha256').update(next);
  const walk = async (dir: string): Promise<void> => {
    const entries = (await readdir(dir, { withFileTypes: true })).sort((a, b) =>
      a.name.localeCompare(b.name),
    );
    for (const entry of entries) {
      if (entry.name === 'node_modules' || entry.name === '.next') continue;
      const path = join(dir, entry.name);
      if (entry.isDirectory()) await walk(path);
      else hash.update(path).update(await readFile(path));
    }
  };
  for (const dir of BUILD_INPUTS) await walk(dir);
  return hash.digest('hex');
}

// The build's output does not depend on the Node that serves it: a build of the same inputs (an
// earlier run on another Node major, say) is served again rather than made again.
beforeAll(async () => {
  const inputs = await hashInputs();
  if ((await readFile(BUILT_FROM, 'utf8').catch(() => '')) === inputs) return;
  await rm(BUILT_FROM, { force: true });
  await promisify(execFile)(process.execPath, [next, 'build'], {
    cwd: app,
    env: { ...process.env, ...env },
    maxBuffer: 16 * 1024 * 1024,
  });
  await writeFile(BUILT_FROM, inputs);
}, 240_000);

async function start(settings: Record<string, string>): Promise<RuntimeServer> {
  const port = await freePort();
  const server = await spawnServer(process.execPath, [next, 'start', '-p', String(port), '-H', '127.0.0.1'], {
    cwd: app,
    env: { ...env, ...settings },
    ready: /Ready in/,
  });
  return { ...server, url: `http://127.0.0.1:${port}` };
}

// A route handler sees no socket: the example reads the address from x-real-ip, which the proxy
// in front of the app writes over whatever the client sent (Vercel's edge, a load balancer). The
// rows play that proxy: every request carries x-real-ip: 127.0.0.1, after the row's own headers.
describeRuntimeConformance({
  name: 'nextjs',
  path: '/api/webhooks',
  // Next.js answers /api/webhooks/ with a redirect to /api/webhooks, before the route runs.
  trailingSlash: false,
  edgeHeaders: { 'x-real-ip': '127.0.0.1' },
  // A route handler has no socket to hold open: `next start` may close the connection once the
  // 413 is sent, while a client that writes its whole body first is still writing (seen in one
  // run of five), so that client may see a reset rather than the 413. Never another answer.
  resetsUnreadBody: true,
  start,
});

describe('nextjs without the address header', () => {
  it('refuses with 500 client_address_unknown when no proxy wrote the client address, running nothing', async () => {
    const server = await start({ BUSINESS_ID, ALLOWED_IPS: '127.0.0.1' });
    try {
      const event = createTestEvent('payment.session.succeeded', BUSINESS_ID);
      const res = await fetch(`${server.url}/api/webhooks`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(event),
      });
      expect(res.status).toBe(500);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('client_address_unknown');
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(server.output()).not.toContain(`payment=${event.data.id}`);
    } finally {
      await server.close();
    }
  });
});
