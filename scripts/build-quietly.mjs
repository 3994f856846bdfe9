#!/usr/bin/env node
// `pnpm demo`'s build: the packages are built as `pnpm build` builds them, with one line of
// progress instead of the hundreds of lines the bundler prints; its output is shown only if the
// build fails, so that the demo's own story is what a newcomer reads. When every package's dist/
// is newer than everything its build reads (a second `pnpm demo`, or one after `pnpm test`), the
// build is skipped; `pnpm build` always builds.
import { spawn } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

/** The newest (or oldest) modification time of the files under `path`, or of `path` itself. */
function mtimes(path) {
  let stat;
  try {
    stat = statSync(path);
  } catch {
    return undefined;
  }
  if (!stat.isDirectory()) return { newest: stat.mtimeMs, oldest: stat.mtimeMs };
  let newest = -Infinity;
  let oldest = Infinity;
  for (const entry of readdirSync(path)) {
    const inner = mtimes(join(path, entry));
    if (!inner) continue;
    newest = Math.max(newest, inner.newest);
    oldest = Math.min(oldest, inner.oldest);
  }
  return { newest, oldest };
}

/** True when every package has a dist/ made after the last change to what its build reads. */
function builtAlready() {
  const shared = ['tsup.config.base.ts', 'tsconfig.base.json', 'pnpm-lock.yaml'].map((file) =>
    mtimes(join(root, file)),
  );
  for (const name of readdirSync(join(root, 'packages'))) {
    const pkg = join(root, 'packages', name);
    const dist = mtimes(join(pkg, 'dist'));
    if (!dist || dist.oldest === Infinity) return false;
    const inputs = [
      ...shared,
      ...['src', 'package.json', 'tsup.config.ts', 'tsconfig.json'].map((file) => mtimes(join(pkg, file))),
    ];
    if (inputs.some((input) => input && input.newest >= dist.oldest)) return false;
  }
  return true;
}

if (builtAlready()) {
  process.stdout.write('The packages are built already (dist/ is newer than their sources).\n');
  process.exit(0);
}

process.stdout.write('Building the packages (about a minute on a first run)...\n');
const child = spawn('pnpm', ['build'], {
  stdio: ['ignore', 'pipe', 'pipe'],
  shell: process.platform === 'win32',
});
const output = [];
child.stdout.on('data', (chunk) => output.push(chunk));
child.stderr.on('data', (chunk) => output.push(chunk));
child.on('close', (code) => {
  if (code === 0) return;
  process.stderr.write(Buffer.concat(output));
  process.stderr.write(`\nThe build failed (exit code ${code}); its output is above.\n`);
  process.exit(code ?? 1);
});
