#!/usr/bin/env node
// `pnpm pack:all`: the packages as tarballs an app outside this repository installs by path, until
// they are published. Builds the packages that are out of date (scripts/build.mjs: after `pnpm
// demo` or `pnpm build`, none), then packs each into <out-dir> under a name without
// its version (payhook-core.tgz, ..., payhook.tgz for the command line), so the install line in the
// README stays the same from one version to the next. pnpm pack writes each `workspace:^`
// dependency as the range a release carries (^0.1.0), which the sibling tarballs satisfy: npm takes
// @payhook/* from the files given on its command line and never asks a registry for them.
//
//   pnpm pack:all [--out-dir <dir>] [--no-build]
//
// --out-dir defaults to ./tarballs (git-ignored). --no-build packs the dist/ already there (the
// packaging test does: rebuilding cleans dist/ under the tests running beside it).
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from './build.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
// Dependencies before their dependents; the order the lines below list them in.
const PACKAGES = ['core', 'express', 'koa', 'fastify', 'web', 'redis', 'postgres', 'sender', 'cli'];
const typedIn = process.env.INIT_CWD ?? process.cwd();

function fail(message) {
  console.error(`pack:all: ${message}`);
  process.exit(1);
}

function parseArgs(argv) {
  const options = { outDir: join(root, 'tarballs'), build: true };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--') continue;
    if (arg === '--no-build') options.build = false;
    else if (arg === '--out-dir' && argv[i + 1]) {
      // Relative to where the command was typed (pnpm runs scripts from the repository's root).
      options.outDir = resolve(typedIn, argv[++i]);
    } else fail(`unknown argument ${arg}. Usage: pnpm pack:all [--out-dir <dir>] [--no-build]`);
  }
  return options;
}

function pnpm(args, cwd, stdio) {
  // pnpm is a .cmd shim on Windows, which only a shell runs.
  const result = spawnSync('pnpm', args, {
    cwd,
    stdio,
    encoding: 'utf8',
    shell: process.platform === 'win32',
  });
  if (result.error) fail(`pnpm ${args.join(' ')}: ${result.error.message}`);
  if (result.status !== 0)
    fail(`pnpm ${args.join(' ')} exited with ${result.status}\n${result.stderr ?? ''}`);
  return result.stdout;
}

const quote = (path) => (/^[\w./:@+-]+$/.test(path) ? path : `'${path.replaceAll("'", "'\\''")}'`);

const options = parseArgs(process.argv.slice(2));
if (options.build) {
  const code = await build({ quiet: true });
  if (code !== 0) process.exit(code);
}
mkdirSync(options.outDir, { recursive: true });

const packed = new Map();
for (const dir of PACKAGES) {
  const manifest = JSON.parse(readFileSync(join(root, 'packages', dir, 'package.json'), 'utf8'));
  const out = pnpm(['pack', '--json', '--out', join(options.outDir, '%s.tgz')], join(root, 'packages', dir), [
    'ignore',
    'pipe',
    'pipe',
  ]);
  const { filename } = JSON.parse(out);
  const workspaceDeps = Object.entries(manifest.dependencies ?? {})
    .filter(([, range]) => String(range).startsWith('workspace:'))
    .map(([name]) => name);
  packed.set(manifest.name, { dir, version: manifest.version, filename, workspaceDeps });
}

/** The tarballs one package needs: itself and, transitively, the @payhook packages it depends on. */
function closure(name, seen = new Set()) {
  if (seen.has(name)) return seen;
  seen.add(name);
  for (const dep of packed.get(name).workspaceDeps) closure(dep, seen);
  return seen;
}
const line = (name, extra = []) =>
  ['npm install', ...extra, ...[...closure(name)].map((n) => quote(packed.get(n).filename))].join(' ');

const near = relative(typedIn, options.outDir);
const shown = near.startsWith('..') ? options.outDir : near || '.';
console.log(`\nPacked ${packed.size} packages into ${shown}/:`);
for (const [name, { version, filename }] of packed) {
  console.log(`  ${relative(options.outDir, filename).padEnd(22)} ${name}@${version}`);
}
console.log(`
In your app, install by path what it uses (npm takes @payhook/* from these files, the rest from
its registry; pnpm add and yarn add take the same paths):
  Express:      ${line('@payhook/express')}
  Koa:          ${line('@payhook/koa')}
  Fastify:      ${line('@payhook/fastify')}
  Web handler:  ${line('@payhook/web')}
  Redis store:  ${line('@payhook/redis')} ioredis
  PostgreSQL:   ${line('@payhook/postgres')} pg
  Sender:       ${line('@payhook/sender')}
  Command line: ${line('payhook', ['--save-dev'])}
After pulling a newer payhook, run pnpm pack:all and the same npm install line again (a bare
npm install keeps the copies it installed before).`);
