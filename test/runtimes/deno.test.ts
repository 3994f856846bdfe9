// @module-tag process
// @module-tag build
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/free-port.js';
import {
  describeRuntimeConformance,
  ROOT,
  type RuntimeServer,
  requireBinary,
  requireBuilt,
  spawnServer,
} from './runtime-conformance.js';

// examples/web-deno/server.mjs on Deno (the pinned `deno` package): Deno.serve with @payhook/web's
// handler, the built packages and their npm dependencies read from the workspace's node_modules
// (Deno uses them as they are next to a package.json). A fresh DENO_DIR, nothing fetched.
// The binary itself, not the package's launcher, which runs it as a child.
const deno = requireBinary(`${ROOT}node_modules/deno/deno`, 'Deno (the deno package)');
requireBuilt();
const denoDir = mkdtempSync(join(tmpdir(), 'payhook-deno-'));
afterAll(() => rmSync(denoDir, { recursive: true, force: true }));

async function start(env: Record<string, string>): Promise<RuntimeServer> {
  const port = await freePort();
  const server = await spawnServer(
    deno,
    ['run', '--allow-net', '--allow-env', '--allow-read', '--no-prompt', '--cached-only', 'server.mjs'],
    {
      cwd: `${ROOT}examples/web-deno`,
      env: { ...env, HOST: '127.0.0.1', PORT: String(port), DENO_DIR: denoDir, DENO_NO_UPDATE_CHECK: '1' },
      ready: /deno receiver on /,
    },
  );
  return { ...server, url: `http://127.0.0.1:${port}` };
}

describeRuntimeConformance({
  name: 'deno',
  path: '/webhooks',
  trailingSlash: true,
  start,
});

describe('deno: the example without its settings', () => {
  it('refuses to start, exiting 2 with a message that names them', async () => {
    await expect(start({ BUSINESS_ID: '', ALLOWED_IPS: '' })).rejects.toThrow(
      /did not start \(2\)[\s\S]*BUSINESS_ID/,
    );
  });
});
