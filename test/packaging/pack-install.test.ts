// @module-tag process
// @module-tag build
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { generateSigningSecret } from '@payhook/core';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/free-port.js';
import { NPM_FLAGS, startApp, trigger } from './outside-app.js';
import { quickstartBlock } from './quickstart-apps.js';

// The packages as a merchant installs them from a clone: `pnpm pack:all` (the README's install
// section) packs them like a release, and npm installs the tarballs into apps outside the
// workspace. One app is the README's line and its Express quickstart, sent a signed event over
// loopback; the other has every package, used from ESM and from CommonJS, and type-checked in both
// with `skipLibCheck: false`, so that every declaration file a package ships is checked too.

const root = fileURLToPath(new URL('../..', import.meta.url));
const run = promisify(execFile);
const PACKAGES = 'core express koa fastify web redis postgres sender cli'.split(' ');
const tsc = join(root, 'node_modules/typescript/bin/tsc');
const cli = join(root, 'packages/cli/dist/cli.js');
// The clone's path as the README writes it.
const README_CLONE = '/path/to/payhook';
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
import { createWebHandler } from '@payhook/web';
import { createRedisStore } from '@payhook/redis';
import { createPostgresStore, inboxMigrationSql } from '@payhook/postgres';
import { checkWebhookUrl } from '@payhook/sender';`
      : `const express = require('express');
const Koa = require('koa');
const { fastify } = require('fastify');
const { createReceiver, generateSigningSecret } = require('@payhook/core');
const { createTestEvent, createTestRequest } = require('@payhook/core/testing');
const { payhook: expressPayhook } = require('@payhook/express');
const { payhook: koaPayhook } = require('@payhook/koa');
const { payhook: fastifyPayhook } = require('@payhook/fastify');
const { createWebHandler } = require('@payhook/web');
const { createRedisStore } = require('@payhook/redis');
const { createPostgresStore, inboxMigrationSql } = require('@payhook/postgres');
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
  const web = createWebHandler(receiver(), { getClientAddress: () => '127.0.0.1' });
  const signed = createTestRequest(createTestEvent('payment.session.succeeded', BIZ), { secrets: [secret] });
  const answer = await web(new Request('http://127.0.0.1/webhooks', { method: 'POST', headers: signed.headers, body: signed.body }));
  if (answer.status !== 200) throw new Error('web answered ' + answer.status + ' ' + (await answer.text()));
  for (let i = 0; i < 100 && handled.length < 4; i++) await new Promise((resolve) => setTimeout(resolve, 20));
  if (handled.join() !== 'settled,settled,settled,settled') throw new Error('handled: ' + handled.join());
  if (typeof createRedisStore !== 'function') throw new Error('@payhook/redis');
  const store = createPostgresStore({ pool: 'postgres://postgres@127.0.0.1:1/none', schema: 'merchant_inbox' });
  if (typeof store.runInTransaction !== 'function' || !inboxMigrationSql().includes('CREATE TABLE')) throw new Error('@payhook/postgres');
  await store.close();
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
import { createWebHandler, type WebHandler } from '@payhook/web';
import { createRedisStore } from '@payhook/redis';
import { createPostgresStore, pgTransaction } from '@payhook/postgres';
import { checkWebhookUrl } from '@payhook/sender';
import pg from "pg"; // type-checked only: this app never connects

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
export const POST: WebHandler = createWebHandler(receiver, { path: '/webhooks', processing: 'after-response' });
const verified = verifyChecksum({ payload: createTestEvent('payment.session.failed', businessId) }, { businessIds: [businessId] });
if (verified.ok) console.log(verified.event);
createRedisStore({ redis: 'redis://127.0.0.1:6379', checkPersistence: false, durability: 'default' });
const inPostgres = createReceiver({ businessIds: [businessId], allowAnyIp: true, store: createPostgresStore({ pool: new pg.Pool(), schema: 'payhook' }) });
inPostgres.on('payment.session.succeeded', async (event, context) => {
  const written: pg.QueryResult = await pgTransaction(context).query('UPDATE orders SET paid = true WHERE id = $1', [event.data.id]);
  return written.rowCount;
});
void checkWebhookUrl('https://merchant.example/webhooks');
export const kind = '${kind}';
`;

// What the README's install section tells a newcomer to run, run the same way: `pnpm pack:all`
// (packing the dist/ built already: rebuilding would clean it under the tests running beside this
// one), then the printed npm install line in an app outside the clone.
let base = '';
let tarballs = '';
let packOutput = '';

beforeAll(async () => {
  for (const name of PACKAGES) {
    if (!existsSync(join(root, 'packages', name, 'dist'))) {
      throw new Error(`packages/${name}/dist is missing: run pnpm build first.`);
    }
  }
  base = await mkdtemp(join(tmpdir(), 'payhook-install-'));
  tarballs = join(base, 'tarballs');
  const packed = await run('pnpm', ['-s', 'pack:all', '--no-build', '--out-dir', tarballs], {
    cwd: root,
    timeout: 120_000,
  });
  packOutput = packed.stdout;
}, 180_000);

afterAll(async () => {
  if (base) await rm(base, { recursive: true, force: true });
});

describe('the packages as a merchant installs them from a clone', () => {
  it("pnpm pack:all and the README's npm install line give an Express receiver that verifies a signed event", async () => {
    const files = (await readdir(tarballs)).sort();
    expect(files).toEqual(
      [
        'payhook-core',
        'payhook-express',
        'payhook-fastify',
        'payhook-koa',
        'payhook-postgres',
        'payhook-redis',
        'payhook-sender',
        'payhook-web',
        'payhook',
      ]
        .map((name) => `${name}.tgz`)
        .sort(),
    );
    // The line the README shows, with the clone's path, is the line pack:all prints.
    const readme = await readFile(join(root, 'README.md'), 'utf8');
    const documented = `npm install ${README_CLONE}/tarballs/payhook-express.tgz ${README_CLONE}/tarballs/payhook-core.tgz`;
    expect(readme).toContain(documented);
    const printed = /^\s*Express:\s+(npm install .+)$/m.exec(packOutput)?.[1];
    expect(printed).toBe(documented.replaceAll(`${README_CLONE}/tarballs`, tarballs));

    const app = join(base, 'express-app');
    await mkdir(app);
    await writeFile(join(app, 'package.json'), JSON.stringify({ name: 'merchant-app', private: true }));
    const [, ...args] = (printed ?? '').split(' ');
    await run('npm', [...args, ...NPM_FLAGS], { cwd: app, timeout: 300_000 }).catch(
      (error: { stderr?: string }) => {
        throw new Error(`${printed}: ${error.stderr ?? error}`);
      },
    );
    // workspace:^ became the range a release carries, which the core tarball satisfied.
    const express = JSON.parse(
      await readFile(join(app, 'node_modules/@payhook/express/package.json'), 'utf8'),
    );
    expect(express.dependencies['@payhook/core']).toBe(`^${express.version}`);
    const manifest = JSON.parse(await readFile(join(app, 'package.json'), 'utf8'));
    expect(manifest.dependencies['@payhook/core']).toMatch(/^file:.*payhook-core\.tgz$/);

    // The README's Express app, as pasted.
    await writeFile(
      join(app, 'index.mjs'),
      quickstartBlock(join(root, 'README.md'), '## Receive events: an Express app'),
    );
    const businessId = randomUUID();
    const secret = generateSigningSecret();
    const receiver = await startApp(
      app,
      {
        BUSINESS_ID: businessId,
        WEBHOOK_SECRET: secret,
        ALLOWED_IPS: '127.0.0.1,::1',
        PORT: String(await freePort()),
      },
      /^Receiving events at http:\/\/localhost:(\d+)\/webhooks$/,
    );
    try {
      // The event as the repository's own command line signs and sends it.
      const sent = await trigger(cli, receiver.port, businessId, secret);
      expect(sent).toMatchObject({ status: 200, body: { received: true } });
      const handled = await receiver.line(/^payment\.session\.succeeded /);
      expect(handled).toMatch(
        new RegExp(`^payment\\.session\\.succeeded ${sent.payload.data.id}: \\d+ [A-Z]{3}$`),
      );
    } finally {
      await receiver.stop();
    }
    expect(receiver.stderr()).toBe('');
  }, 600_000);

  it.each(['express', 'koa', 'fastify'])(
    'payhook init --framework %s writes an app that npm installs from the tarballs and that handles a signed event',
    async (framework) => {
      const app = join(base, `init-${framework}`);
      const written = await run(process.execPath, [
        cli,
        'init',
        app,
        '--framework',
        framework,
        '--tarballs',
        tarballs,
      ]);
      expect(written.stdout).toContain(`the tarballs in ${tarballs}`);
      const manifest = JSON.parse(await readFile(join(app, 'package.json'), 'utf8'));
      expect(manifest.dependencies[`@payhook/${framework}`]).toMatch(
        new RegExp(`^file:.*payhook-${framework}\\.tgz$`),
      );
      await run('npm', ['install', ...NPM_FLAGS], { cwd: app, timeout: 300_000 }).catch(
        (error: { stderr?: string }) => {
          throw new Error(`npm install in the ${framework} app: ${error.stderr ?? error}`);
        },
      );

      const businessId = randomUUID();
      const secret = generateSigningSecret();
      const receiver = await startApp(
        app,
        { BUSINESS_ID: businessId, WEBHOOK_SECRET: secret, ALLOWED_IPS: '127.0.0.1,::1', PORT: '0' },
        /^Receiving events at http:\/\/localhost:(\d+)\/webhooks$/,
      );
      try {
        const sent = await trigger(cli, receiver.port, businessId, secret);
        expect(sent).toMatchObject({ status: 200, body: { received: true } });
        const handled = `payment.session.succeeded ${sent.payload.data.id} (settled)`;
        expect(await receiver.line(/^payment\.session\.succeeded /)).toBe(handled);
      } finally {
        await receiver.stop();
      }
      expect(receiver.stderr()).toBe('');
    },
    300_000,
  );

  it('every tarball installed with npm outside the workspace: run from ESM and CommonJS, type-checked strictly', async () => {
    const files = (await readdir(tarballs)).map((f) => join(tarballs, f));
    expect(files).toHaveLength(PACKAGES.length);

    const app = join(base, 'all');
    await mkdir(app);
    await writeFile(join(app, 'package.json'), JSON.stringify({ name: 'merchant-app', private: true }));
    await run(
      'npm',
      [
        'install',
        ...NPM_FLAGS,
        ...files,
        'express@5',
        'koa@3',
        'fastify@5',
        'ioredis@5',
        'pg@8',
        '@types/pg@8',
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
    // Core's CommonJS build requires typebox, installed once, rather than carrying a copy (with one,
    // the file was 549 KB; without, about 200 KB, 24 KB of it the SHA-256 rounds written out).
    const coreCjs = await readFile(join(app, 'node_modules/@payhook/core/dist/index.cjs'), 'utf8');
    expect(coreCjs).toContain('require("typebox")');
    expect(coreCjs.length).toBeLessThan(300_000);
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
    // nodenext (TypeScript's require() of ESM, as Node 20.19+ does): tsc as a merchant runs it, every
    // file in the program checked, the dependencies' declaration files with ours.
    const checked = await run(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: app }).then(
      () => '',
      (error: { stdout?: string }) => error.stdout ?? String(error),
    );
    expect(checked, 'module nodenext').toBe('');
    // node16 (which has no require() of ESM: where an ESM-only import in a CommonJS declaration file
    // is TS1479): the same program, what tsc reports for the consumers and for every @payhook
    // declaration file in it (still with skipLibCheck false), the dependencies' checked once above:
    // checking all of them again is four fifths of the time for nothing of ours.
    const node16 = ts.getParsedCommandLineOfConfigFile(
      join(app, 'tsconfig.json'),
      { module: ts.ModuleKind.Node16, moduleResolution: ts.ModuleResolutionKind.Node16 },
      {
        ...ts.sys,
        onUnRecoverableConfigFileDiagnostic: (d) => {
          throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
        },
      },
    );
    if (!node16) throw new Error('tsconfig.json: not read');
    expect(node16.options.skipLibCheck).toBe(false);
    const program = ts.createProgram({ rootNames: node16.fileNames, options: node16.options });
    const ours = program
      .getSourceFiles()
      .filter(
        (f) => !f.fileName.includes('/node_modules/') || f.fileName.includes('/node_modules/@payhook/'),
      );
    // The consumers and, of each package, at least its entry's ESM and CommonJS declarations.
    expect(ours.filter((f) => f.fileName.includes('/node_modules/@payhook/')).length).toBeGreaterThanOrEqual(
      2 * (PACKAGES.length - 1),
    );
    expect(
      ours.filter((f) => !f.fileName.includes('/node_modules/')).map((f) => f.fileName.slice(app.length + 1)),
    ).toEqual(['consumer.mts', 'consumer.cts']);
    const diagnostics = [
      ...program.getConfigFileParsingDiagnostics(),
      ...program.getOptionsDiagnostics(),
      ...program.getGlobalDiagnostics(),
      ...ours.flatMap((f) => [...program.getSyntacticDiagnostics(f), ...program.getSemanticDiagnostics(f)]),
    ];
    const host = {
      getCanonicalFileName: (f: string) => f,
      getCurrentDirectory: () => app,
      getNewLine: () => '\n',
    };
    expect(ts.formatDiagnostics(diagnostics, host), 'module node16').toBe('');
  }, 600_000);
});
