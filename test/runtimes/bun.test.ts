// @module-tag process
// @module-tag build
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { freePort } from '../support/free-port.js';
import {
  describeRuntimeConformance,
  ROOT,
  type RuntimeServer,
  requireBinary,
  requireBuilt,
  spawnServer,
} from './runtime-conformance.js';

// examples/web-bun/server.mjs on Bun (the pinned `bun` package), as `bun server.mjs` runs it:
// Bun.serve with @payhook/web's handler, the built packages.
// The binary itself, not the package's launcher script, which would outlive a stop as its parent.
const bun = requireBinary(`${ROOT}node_modules/bun/bin/bun.exe`, 'Bun (the bun package)');
requireBuilt();

async function start(env: Record<string, string>): Promise<RuntimeServer> {
  const port = await freePort();
  const server = await spawnServer(bun, ['server.mjs'], {
    cwd: `${ROOT}examples/web-bun`,
    env: { ...env, HOST: '127.0.0.1', PORT: String(port) },
    ready: /bun receiver on /,
  });
  return { ...server, url: `http://127.0.0.1:${port}` };
}

describeRuntimeConformance({
  name: 'bun',
  path: '/webhooks',
  trailingSlash: true,
  // Bun closes the connection once the 413 is sent, while the client may still be writing.
  resetsUnreadBody: true,
  start,
});

describe('bun: the example without its settings', () => {
  it('refuses to start, exiting 2 with a message that names them', async () => {
    await expect(start({ BUSINESS_ID: '', ALLOWED_IPS: '' })).rejects.toThrow(
      /did not start \(2\)[\s\S]*BUSINESS_ID/,
    );
  });
});

describe("bun: the Web path, hashed by Bun's native CryptoHasher", () => {
  it("gives the default path's verdict on every event and signature, from a few bytes to 40 KB", async () => {
    const { stdout } = await promisify(execFile)(bun, [`${ROOT}test/runtimes/web-path-parity.mjs`], {
      timeout: 60_000,
    });
    const result = JSON.parse(stdout.trim().split('\n').pop() as string) as {
      runtime: string;
      native: boolean;
      cases: number;
      mismatches: unknown[];
    };
    expect(result).toMatchObject({ runtime: 'bun', native: true });
    expect(result.cases).toBeGreaterThan(100);
    expect(result.mismatches).toEqual([]);
  });
});
