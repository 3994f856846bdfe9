// @module-tag process
// @module-tag build
// @module-tag pglite
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Started, startServe, stopServe } from '../../packages/cli/test/run-cli.js';
import { requireBinary, spawnServer } from '../runtimes/runtime-conformance.js';
import { freePort } from '../support/free-port.js';
import { copyPgliteTemplate } from '../support/pglite-template.js';
import { NPM_FLAGS } from './outside-app.js';
import { MINIFLARE_RUNNER, payhook, quickstartBlock, receiverSettings } from './quickstart-apps.js';

// Every quickstart as a reader pastes it, against `payhook serve`: the code block of the README
// (Express), docs/receivers.md (Koa, Fastify) and docs/web-runtimes.md (Next.js under `next dev`
// and `next build` + `next start`, Hono, Bun, Deno, the Worker with its Durable Object under
// `wrangler dev`), and the apps `payhook init --framework` writes for the Web runtimes (next,
// hono, bun, deno, and worker under wrangler dev and on Miniflare). Each app sits outside the
// workspace with @payhook/* installed by npm from the packed tarballs, runs on its runtime, and
// gets one event from `payhook trigger --to`, real events that the sender makes and delivers, and
// `payhook check`'s eleven cases, every one passing.

const root = fileURLToPath(new URL('../..', import.meta.url));
const cli = join(root, 'packages/cli/dist/cli.js');
const bun = requireBinary(join(root, 'node_modules/.bin/bun'), 'Bun (the bun package)');
const deno = requireBinary(join(root, 'node_modules/.bin/deno'), 'Deno (the deno package)');
const workerExample = join(root, 'examples/web-worker/package.json');
const esbuild = createRequire(workerExample).resolve('esbuild');
const miniflare = createRequire(workerExample).resolve('miniflare');
const LOCAL_IPS = '127.0.0.1,::1';

let base = '';
let apps = '';
let sender: Started & { url: string; apiKey: string };
let settings: { businessId: string; webhookSecret: string };

beforeAll(async () => {
  for (const name of ['core', 'express', 'koa', 'fastify', 'web', 'cli']) {
    if (!existsSync(join(root, 'packages', name, 'dist')))
      throw new Error(`packages/${name}/dist is missing: run pnpm build first.`);
  }
  base = await mkdtemp(join(tmpdir(), 'payhook-quickstarts-'));
  const tarballs = join(base, 'tarballs');
  await promisify(execFile)('pnpm', ['-s', 'pack:all', '--no-build', '--out-dir', tarballs], {
    cwd: root,
    timeout: 120_000,
  });
  // One install for every app below, each in a directory of its own under it (Node, Bun, Deno and
  // Next.js all resolve packages from a parent's node_modules).
  apps = join(base, 'apps');
  await mkdir(apps);
  await writeFile(
    join(apps, 'package.json'),
    JSON.stringify({ name: 'merchant-apps', private: true, type: 'module' }),
  );
  const payhookTarballs = ['core', 'express', 'koa', 'fastify', 'web'].map((p) =>
    join(tarballs, `payhook-${p}.tgz`),
  );
  const frameworks = ['express@5', 'koa@3', 'fastify@5', 'hono@4', '@hono/node-server@2', 'wrangler@4'];
  const next = [
    'next@16.4.6',
    'react@19.3.1',
    'react-dom@19.3.1',
    'typescript@5.9.3',
    '@types/react@19',
    '@types/node@20',
  ];
  await promisify(execFile)('npm', ['install', ...NPM_FLAGS, ...payhookTarballs, ...frameworks, ...next], {
    cwd: apps,
    timeout: 600_000,
  }).catch((error: { stderr?: string }) => {
    throw new Error(`npm install of the tarballs and the frameworks: ${error.stderr ?? error}`);
  });

  await copyPgliteTemplate(join(base, 'data'));
  sender = await startServe(join(base, 'data'), '4f1c7a2e-9b3d-4e8f-a6c5-1d2e3f4a5b6c', [
    '--allow-private-webhooks',
  ]);
  settings = receiverSettings(sender.out);
}, 900_000);

// The sender's stop may wait out its shutdown grace, and the install tree is large to remove.
afterAll(async () => {
  if (sender) await stopServe(sender);
  if (base) await rm(base, { recursive: true, force: true });
}, 120_000);

/** Writes `files` into a new app directory named `name`; returns its path. */
async function app(name: string, files: Record<string, string>): Promise<string> {
  const dir = join(apps, name);
  for (const [file, source] of Object.entries(files)) {
    await mkdir(dirname(join(dir, file)), { recursive: true });
    await writeFile(join(dir, file), source);
  }
  return dir;
}

/**
 * The files `payhook init --framework <framework>` writes (the framework: `name` up to a dash),
 * but its package.json: the install is shared.
 */
async function initApp(name: string): Promise<string> {
  const framework = name.split('-')[0] as string;
  const dir = join(apps, `init-${name}`);
  await payhook(cli, ['init', dir, '--framework', framework, '--tarballs', join(base, 'tarballs')]);
  await rm(join(dir, 'package.json'));
  expect((await readdir(dir)).length).toBeGreaterThan(1);
  return dir;
}

type Start = (env: Record<string, string>) => Promise<{ output(): string; close(): Promise<void> }>;

/**
 * Starts the app with what `payhook serve` printed (ALLOWED_IPS as given), then: one signed event
 * straight to it, real events from the sender to its registered URL, and `payhook check`, 11 of 11.
 */
async function receivesFromServe(start: Start, path: string, allowedIps = LOCAL_IPS): Promise<void> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}${path}`;
  const server = await start({
    BUSINESS_ID: settings.businessId,
    WEBHOOK_SECRET: settings.webhookSecret,
    ALLOWED_IPS: allowedIps,
    PORT: String(port),
  });
  const handled = () =>
    server
      .output()
      .split('\n')
      .filter((l) => l.startsWith('payment.session.succeeded '));
  try {
    const sent = JSON.parse(
      await payhook(cli, [
        'trigger',
        'payment.session.succeeded',
        '--to',
        url,
        '--business-id',
        settings.businessId,
        '--secret',
        settings.webhookSecret,
        '--json',
      ]),
    ) as { status: number; body: unknown; payload: { data: { id: string } } };
    expect(sent, server.output()).toMatchObject({ status: 200, body: { received: true } });
    await expect
      .poll(handled, { timeout: 20_000 })
      .toContainEqual(expect.stringContaining(sent.payload.data.id));

    // The sender makes a payment succeed and delivers its events to the registered URL.
    const api = ['--api-key', sender.apiKey, '--base-url', sender.url];
    await payhook(cli, ['endpoints', 'add', url, ...api]);
    try {
      await payhook(cli, ['trigger', 'payment.session.succeeded', ...api]);
      await expect.poll(() => handled().length, { timeout: 30_000 }).toBeGreaterThanOrEqual(2);
    } finally {
      await payhook(cli, ['endpoints', 'remove', url, ...api]);
    }

    const check = JSON.parse(
      await payhook(cli, [
        'check',
        url,
        '--business-id',
        settings.businessId,
        '--secret',
        settings.webhookSecret,
        '--json',
      ]),
    ) as { passed: boolean; cases: { name: string; ok: boolean }[] };
    expect(check.cases.filter((c) => !c.ok)).toEqual([]);
    expect(check.cases).toHaveLength(11);
  } finally {
    await server.close();
  }
}

/** `command args` in `cwd`, ready once it prints `Receiving events at` (or `ready`). */
const runs =
  (command: string, args: string[], cwd: string, ready = /Receiving events at /): Start =>
  (env) =>
    spawnServer(command, args, {
      cwd,
      env: { ...env, NEXT_TELEMETRY_DISABLED: '1' },
      ready,
      timeoutMs: 120_000,
    });

const nextBin = () => join(apps, 'node_modules/next/dist/bin/next');

/** `wrangler dev` in `dir`, the settings in .dev.vars as a reader writes them. */
const wranglerDev =
  (dir: string): Start =>
  async (env) => {
    const vars = ['BUSINESS_ID', 'WEBHOOK_SECRET', 'ALLOWED_IPS'].map((name) => `${name}=${env[name]}\n`);
    await writeFile(join(dir, '.dev.vars'), vars.join(''));
    const wrangler = join(apps, 'node_modules/wrangler/bin/wrangler.js');
    const args = [wrangler, 'dev', '--port', env.PORT as string, '--ip', '127.0.0.1'];
    // Offline, wrangler warns that it cannot fetch Request.cf and uses a placeholder.
    return runs(process.execPath, args, dir, /Ready on http/)({ WRANGLER_SEND_METRICS: 'false', CI: '1' });
  };

describe('every quickstart as pasted, installed from the tarballs, against payhook serve', {
  timeout: 600_000,
}, () => {
  it("the README's Express app", async () => {
    const dir = await app('express', {
      'index.mjs': quickstartBlock(join(root, 'README.md'), '## Receive events: an Express app'),
    });
    await receivesFromServe(runs(process.execPath, ['index.mjs'], dir), '/webhooks');
  });

  it.each(['Koa', 'Fastify'])("docs/receivers.md's %s app", async (framework) => {
    const source = quickstartBlock(join(root, 'docs/receivers.md'), `### ${framework}`);
    const dir = await app(framework.toLowerCase(), { 'index.mjs': source });
    await receivesFromServe(runs(process.execPath, ['index.mjs'], dir), '/webhooks');
  });

  it("docs/web-runtimes.md's Hono, Bun and Deno apps", async () => {
    const page = join(root, 'docs/web-runtimes.md');
    const hono = await app('hono', { 'server.mjs': quickstartBlock(page, '## Hono') });
    await receivesFromServe(runs(process.execPath, ['server.mjs'], hono), '/webhooks');
    const onBun = await app('bun', { 'server.ts': quickstartBlock(page, '## Bun') });
    await receivesFromServe(runs(bun, ['server.ts'], onBun), '/webhooks');
    const onDeno = await app('deno', { 'server.ts': quickstartBlock(page, '## Deno') });
    const denoArgs = ['run', '--allow-net', '--allow-env', '--allow-read', 'server.ts'];
    await receivesFromServe(runs(deno, denoArgs, onDeno, /Listening on /), '/webhooks');
  });

  it("docs/web-runtimes.md's Next.js route: next dev, and next build (no settings) then next start", async () => {
    const dir = await app('next', {
      'app/webhooks/route.ts': quickstartBlock(join(root, 'docs/web-runtimes.md'), '## Next.js (App Router)'),
    });
    const dev: Start = (env) =>
      runs(
        process.execPath,
        [nextBin(), 'dev', '-p', env.PORT as string, '-H', '127.0.0.1'],
        dir,
        /Ready in/,
      )(env);
    // With serve's ALLOWED_IPS, nothing tells the route the address: refused, and the app's log
    // names the fix.
    const port = await freePort();
    const blind = await dev({ ...blindEnv(), PORT: String(port) });
    try {
      const refused = await payhook(cli, [
        'trigger',
        'payment.session.succeeded',
        '--to',
        `http://127.0.0.1:${port}/webhooks`,
        '--business-id',
        settings.businessId,
        '--secret',
        settings.webhookSecret,
        '--json',
      ]).catch((error: Error) => error.message);
      expect(refused).toContain('client_address_unknown');
      await expect.poll(blind.output, { timeout: 20_000 }).toContain('allowAnyIp: true');
    } finally {
      await blind.close();
    }
    // As the page says to run it locally: ALLOWED_IPS='*'.
    await receivesFromServe(dev, '/webhooks', '*');
    // next build imports the route without any setting; next start serves it.
    await promisify(execFile)(process.execPath, [nextBin(), 'build'], {
      cwd: dir,
      env: { ...process.env, NEXT_TELEMETRY_DISABLED: '1' },
      timeout: 300_000,
    });
    const start: Start = (env) =>
      runs(
        process.execPath,
        [nextBin(), 'start', '-p', env.PORT as string, '-H', '127.0.0.1'],
        dir,
        /Ready in/,
      )(env);
    await receivesFromServe(start, '/webhooks', '*');
  });

  it('payhook init --framework hono, bun, deno and next write apps that run as written', async () => {
    const hono = await initApp('hono');
    await receivesFromServe(runs(process.execPath, ['index.mjs'], hono), '/webhooks');
    const onBun = await initApp('bun');
    await receivesFromServe(runs(bun, ['index.ts'], onBun), '/webhooks');
    const onDeno = await initApp('deno');
    await receivesFromServe(
      runs(deno, ['run', '--allow-net', '--allow-env', '--allow-read', 'index.ts'], onDeno),
      '/webhooks',
    );
    const next = await initApp('next');
    await receivesFromServe(
      (env) =>
        runs(
          process.execPath,
          [nextBin(), 'dev', '-p', env.PORT as string, '-H', '127.0.0.1'],
          next,
          /Ready in/,
        )(env),
      '/webhooks',
      '*',
    );
  });

  it("docs/web-runtimes.md's Worker with its Durable Object store, under wrangler dev", async () => {
    const toml = (await readFile(join(root, 'examples/web-worker/wrangler.toml'), 'utf8'))
      .replace('main = "worker.mjs"', 'main = "worker.ts"')
      .replace(/\n\[vars\][^[]*/, '\n');
    const dir = await app('worker-do', {
      'worker.ts': quickstartBlock(join(root, 'docs/web-runtimes.md'), '## Cloudflare Workers'),
      // As the page says: the example's store, copied as it is, and a wrangler.toml binding it.
      'store.js': await readFile(join(root, 'examples/web-worker/store.mjs'), 'utf8'),
      'wrangler.toml': toml,
    });
    await receivesFromServe(wranglerDev(dir), '/webhooks');
  });

  it('payhook init --framework worker writes a Worker that runs under wrangler dev, settings in .dev.vars', async () => {
    await receivesFromServe(wranglerDev(await initApp('worker')), '/webhooks');
  });

  it('payhook init --framework worker writes a Worker that runs on Miniflare', async () => {
    const dir = await initApp('worker-miniflare');
    await writeFile(join(dir, 'run-miniflare.mjs'), MINIFLARE_RUNNER(esbuild, miniflare));
    await receivesFromServe(runs(process.execPath, ['run-miniflare.mjs'], dir, /worker on /), '/webhooks');
  });
});

/** serve's settings as printed: the loopback addresses, which a Next.js route cannot see. */
const blindEnv = () => ({
  BUSINESS_ID: settings.businessId,
  WEBHOOK_SECRET: settings.webhookSecret,
  ALLOWED_IPS: LOCAL_IPS,
});
