import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

// The packages as a merchant installs them: packed like a release, installed with npm into an app
// outside the workspace, then used from ESM and from CommonJS, and type-checked in both with
// `skipLibCheck: false`, so that every declaration file a package ships is checked too.

const root = fileURLToPath(new URL('../..', import.meta.url));
const run = promisify(execFile);
const PACKAGES = ['core', 'express', 'koa', 'fastify', 'redis', 'sender', 'cli'];
const tsc = join(root, 'node_modules/typescript/bin/tsc');

/** Receives one signed event on each framework over real HTTP, and checks the 200 and the handler. */
const script = (kind: 'esm' | 'cjs') => {
  const load =
    kind === 'esm'
      ? `import express from 'express';
import Koa from 'koa';
import { fastify } from 'fastify';
import { createReceiver, generateSigningSecret } from '@payhook/core';
import { createTestEvent, createTestRequest } from '@payhook/core/testing';
import { payhook as expressPayhook } from '@payhook/express';
import { payhook as koaPayhook } from '@payhook/koa';
import fastifyPayhook from '@payhook/fastify';
import { createRedisStore } from '@payhook/redis';
import { checkWebhookUrl } from '@payhook/sender';`
      : `const express = require('express');
const Koa = require('koa');
const { fastify } = require('fastify');
const { createReceiver, generateSigningSecret } = require('@payhook/core');
const { createTestEvent, createTestRequest } = require('@payhook/core/testing');
const { payhook: expressPayhook } = require('@payhook/express');
const { payhook: koaPayhook } = require('@payhook/koa');
const { payhook: fastifyPayhook } = require('@payhook/fastify');
const { createRedisStore } = require('@payhook/redis');
const { checkWebhookUrl } = require('@payhook/sender');`;
  return `${load}
const BIZ = 'b7e1c2d3-4f5a-4b6c-8d7e-9f0a1b2c3d4e';
const secret = generateSigningSecret();
const handled = [];
const receiver = () => {
  const r = createReceiver({ businessIds: [BIZ], allowedIps: ['127.0.0.1', '::1'], signingSecrets: [secret], requireSignature: true });
  r.on('payment.session.succeeded', (event) => { handled.push(event.data.status); });
  return r;
};
const post = async (port) => {
  const { body, headers } = createTestRequest(createTestEvent('payment.session.succeeded', BIZ), { secrets: [secret] });
  const res = await fetch('http://127.0.0.1:' + port + '/webhooks', { method: 'POST', headers, body });
  if (res.status !== 200) throw new Error('answered ' + res.status + ' ' + (await res.text()));
};
const main = async () => {
  const e = express();
  e.use('/webhooks', expressPayhook(receiver()));
  const es = e.listen(0, '127.0.0.1');
  await new Promise((resolve) => es.once('listening', resolve));
  await post(es.address().port);
  es.close();
  const k = new Koa();
  k.use(koaPayhook(receiver(), { path: '/webhooks' }));
  const ks = k.listen(0, '127.0.0.1');
  await new Promise((resolve) => ks.once('listening', resolve));
  await post(ks.address().port);
  ks.close();
  const f = fastify();
  await f.register(fastifyPayhook, { receiver: receiver(), path: '/webhooks' });
  await f.listen({ port: 0, host: '127.0.0.1' });
  await post(f.server.address().port);
  await f.close();
  for (let i = 0; i < 100 && handled.length < 3; i++) await new Promise((resolve) => setTimeout(resolve, 20));
  if (handled.join() !== 'settled,settled,settled') throw new Error('handled: ' + handled.join());
  if (typeof createRedisStore !== 'function') throw new Error('@payhook/redis');
  const check = await checkWebhookUrl('http://10.0.0.1/');
  if (check.ok) throw new Error('@payhook/sender');
  console.log('${kind} ok');
};
main().then(() => process.exit(0), (error) => { console.error(error); process.exit(1); });
`;
};

/** The same, type-checked: what a TypeScript merchant writes. */
const consumer = (kind: 'esm' | 'cjs') => `import express from 'express';
import Koa from 'koa';
import { fastify } from 'fastify';
import { createReceiver, type PayhookEvent, verifyChecksum } from '@payhook/core';
import { createTestEvent } from '@payhook/core/testing';
import { payhook as expressPayhook } from '@payhook/express';
import { payhook as koaPayhook } from '@payhook/koa';
import { payhook as fastifyPayhook } from '@payhook/fastify';
import { createRedisStore } from '@payhook/redis';
import { checkWebhookUrl } from '@payhook/sender';

const businessId = process.env.BUSINESS_ID ?? 'b7e1c2d3-4f5a-4b6c-8d7e-9f0a1b2c3d4e';
const receiver = createReceiver({ businessIds: [businessId], allowAnyIp: true });
receiver.on('payment.session.succeeded', async (event) => {
  const amount: number = event.data.amount;
  const order: string = event.data.metadata.order.identifier;
  return { amount, order };
});
receiver.onAny((event: PayhookEvent) => void event.event);
express().use('/webhooks', expressPayhook(receiver));
new Koa().use(koaPayhook(receiver, { path: '/webhooks' }));
void fastify().register(fastifyPayhook, { receiver, path: '/webhooks' });
const verified = verifyChecksum({ payload: createTestEvent('payment.session.failed', businessId) }, { businessIds: [businessId] });
if (verified.ok) console.log(verified.event);
createRedisStore({ redis: 'redis://127.0.0.1:6379', checkPersistence: false, durability: 'default' });
void checkWebhookUrl('https://merchant.example/webhooks');
export const kind = '${kind}';
`;

describe('the packages as a merchant installs them', () => {
  it('pack, install with npm outside the workspace, run from ESM and CommonJS, and type-check both strictly', async () => {
    for (const name of PACKAGES) {
      if (!existsSync(join(root, 'packages', name, 'dist'))) {
        throw new Error(`packages/${name}/dist is missing: run pnpm build first.`);
      }
    }
    const base = await mkdtemp(join(tmpdir(), 'payhook-install-'));
    try {
      const tarballs = join(base, 'tarballs');
      await mkdir(tarballs);
      // pnpm pack writes workspace: ranges as the versions a release would carry.
      for (const name of PACKAGES) {
        await run('pnpm', ['pack', '--pack-destination', tarballs], { cwd: join(root, 'packages', name) });
      }
      const files = (await readdir(tarballs)).map((f) => join(tarballs, f));
      expect(files).toHaveLength(PACKAGES.length);

      const app = join(base, 'app');
      await mkdir(app);
      await writeFile(join(app, 'package.json'), JSON.stringify({ name: 'merchant-app', private: true }));
      await run(
        'npm',
        [
          'install',
          '--no-audit',
          '--no-fund',
          '--loglevel=error',
          ...files,
          'express@5',
          'koa@3',
          'fastify@5',
          'ioredis@5',
          '@types/express@5',
          '@types/koa@2',
          '@types/node@20',
        ],
        { cwd: app, timeout: 300_000 },
      ).catch((error: { stderr?: string }) => {
        throw new Error(`npm install failed: ${error.stderr ?? error}`);
      });

      // Run: ESM and CommonJS.
      await writeFile(join(app, 'esm.mjs'), script('esm'));
      await writeFile(join(app, 'cjs.cjs'), script('cjs'));
      for (const file of ['esm.mjs', 'cjs.cjs']) {
        const { stdout, stderr } = await run(process.execPath, [file], { cwd: app, timeout: 60_000 }).catch(
          (error: { stdout?: string; stderr?: string }) => {
            throw new Error(`${file}: ${error.stderr ?? ''}${error.stdout ?? ''}`);
          },
        );
        expect(stdout).toContain(file === 'esm.mjs' ? 'esm ok' : 'cjs ok');
        // Not a warning either (require() of the ESM-only typebox is silent from node_modules).
        expect(stderr, file).toBe('');
      }
      // Core's CommonJS build requires typebox, installed once, rather than carrying a copy.
      const coreCjs = await readFile(join(app, 'node_modules/@payhook/core/dist/index.cjs'), 'utf8');
      expect(coreCjs).toContain('require("typebox")');
      expect(coreCjs.length).toBeLessThan(200_000);
      const bin = await run(join(app, 'node_modules/.bin/payhook'), ['--help'], { cwd: app });
      expect(bin.stdout).toContain('Usage: payhook <command>');

      // Type-check: an ESM and a CommonJS consumer, strict, every declaration file checked.
      await writeFile(join(app, 'consumer.mts'), consumer('esm'));
      await writeFile(join(app, 'consumer.cts'), consumer('cjs'));
      await writeFile(
        join(app, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            strict: true,
            skipLibCheck: false,
            noEmit: true,
            target: 'es2022',
            module: 'nodenext',
            moduleResolution: 'nodenext',
            types: ['node'],
          },
          files: ['consumer.mts', 'consumer.cts'],
        }),
      );
      // nodenext (TypeScript's require() of ESM, as Node 20.19+ does) and node16 (which has none:
      // where an ESM-only import in a CommonJS declaration file is TS1479).
      for (const module of ['nodenext', 'node16']) {
        const flags = ['--module', module, '--moduleResolution', module];
        const checked = await run(process.execPath, [tsc, '-p', 'tsconfig.json', ...flags], {
          cwd: app,
        }).then(
          () => '',
          (error: { stdout?: string }) => error.stdout ?? String(error),
        );
        expect(checked, `module ${module}`).toBe('');
      }
    } finally {
      await rm(base, { recursive: true, force: true });
    }
  }, 600_000);
});
