// @module-tag process
// @module-tag build
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { payhookCli } from './run-cli.js';

// What `payhook init` writes and refuses. That the app it writes installs from the tarballs and
// handles a signed event is test/packaging/pack-install.test.ts (a real npm install).

const clone = fileURLToPath(new URL('../../..', import.meta.url));
let base = '';

beforeAll(async () => {
  base = await mkdtemp(join(tmpdir(), 'payhook-init-'));
});
afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

describe('payhook init', { timeout: 30_000 }, () => {
  it('writes package.json, index.mjs and README.md, @payhook/* by file: path to the tarballs', async () => {
    const tarballs = join(base, 'tarballs');
    const app = join(base, 'My Receiver');
    const run = await payhookCli(['init', app, '--framework', 'koa', '--tarballs', tarballs]);
    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(run.stdout).toContain('index.mjs (a receiver on koa)');
    // Not packed yet: the command says what to run.
    expect(run.stdout).toContain('No tarballs there yet: run pnpm pack:all');
    expect((await readdir(app)).sort()).toEqual(['README.md', 'index.mjs', 'package.json']);
    const manifest = JSON.parse(await readFile(join(app, 'package.json'), 'utf8'));
    expect(manifest).toMatchObject({
      name: 'my-receiver',
      private: true,
      type: 'module',
      scripts: { start: 'node index.mjs' },
      dependencies: {
        '@payhook/core': 'file:../tarballs/payhook-core.tgz',
        '@payhook/koa': 'file:../tarballs/payhook-koa.tgz',
        koa: '^3.0.0',
      },
    });
    const index = await readFile(join(app, 'index.mjs'), 'utf8');
    expect(index).toContain("import { payhook } from '@payhook/koa';");
    expect(index).toContain('const { BUSINESS_ID, WEBHOOK_SECRET, ALLOWED_IPS, PORT = ');
    expect(await readFile(join(app, 'README.md'), 'utf8')).toContain('run `pnpm pack:all` in the clone');
  });

  it("run from the clone, takes the clone's ./tarballs; express by default", async () => {
    const app = join(base, 'default');
    const run = await payhookCli(['init', app]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`the tarballs in ${join(clone, 'tarballs')}`);
    const manifest = JSON.parse(await readFile(join(app, 'package.json'), 'utf8'));
    expect(manifest.dependencies['@payhook/express']).toMatch(/^file:.*tarballs\/payhook-express\.tgz$/);
    expect(manifest.dependencies.express).toBe('^5.1.0');
  });

  it.each([
    [
      'next',
      ['app/webhooks/route.js'],
      { next: expect.any(String), react: expect.any(String), 'react-dom': expect.any(String) },
    ],
    ['hono', ['index.mjs'], { hono: expect.any(String), '@hono/node-server': expect.any(String) }],
    ['bun', ['index.ts'], {}],
    ['deno', ['index.ts'], {}],
    ['worker', ['worker.mjs', 'wrangler.toml'], {}],
  ])(
    '--framework %s writes the Web handler app (%s), @payhook/web and core from the tarballs',
    async (framework, files, deps) => {
      const tarballs = join(base, 'tarballs');
      const app = join(base, `web-${framework}`);
      const run = await payhookCli(['init', app, '--framework', framework, '--tarballs', tarballs]);
      expect(run).toMatchObject({ code: 0, stderr: '' });
      expect(run.stdout).toContain(`${files[0]} (a receiver on ${framework})`);
      expect(run.stdout).toContain('trigger payment.session.succeeded --to http://localhost:');
      const manifest = JSON.parse(await readFile(join(app, 'package.json'), 'utf8'));
      expect(manifest.dependencies).toEqual({
        '@payhook/core': 'file:../tarballs/payhook-core.tgz',
        '@payhook/web': 'file:../tarballs/payhook-web.tgz',
        ...deps,
      });
      for (const file of files) expect((await readFile(join(app, file), 'utf8')).length).toBeGreaterThan(100);
      const source = await readFile(join(app, files[0] as string), 'utf8');
      expect(source).toContain("import { createWebHandler } from '@payhook/web';");
      // Signatures required: the receiver has the business's signing secret.
      expect(source).toContain('signingSecrets: [WEBHOOK_SECRET]');
      const readme = await readFile(join(app, 'README.md'), 'utf8');
      expect(readme).toContain(framework === 'next' ? "ALLOWED_IPS='*'" : 'ALLOWED_IPS=127.0.0.1,::1');
    },
  );

  it('refuses a directory that is not empty, and a framework it does not know, with exit code 2', async () => {
    const full = join(base, 'full');
    await mkdir(full);
    await writeFile(join(full, 'keep.txt'), 'mine');
    const refused = await payhookCli(['init', full]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('exists and is not an empty directory');
    expect(await readdir(full)).toEqual(['keep.txt']);
    const framework = await payhookCli(['init', join(base, 'hapi'), '--framework', 'hapi']);
    expect(framework.code).toBe(2);
    expect(framework.stderr).toContain(
      '--framework must be one of express, koa, fastify, next, hono, bun, deno, worker, not "hapi".',
    );
    expect((await payhookCli(['init'])).stderr).toContain('<dir> is required.');
  });
});
