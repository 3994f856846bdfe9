#!/usr/bin/env node
// `pnpm build`: builds the packages whose dist/ is out of date (scripts/stale-packages.mjs says
// which and why), in dependency order, and says which were up to date already; `--force` builds
// every package. `--quiet` (what `pnpm demo` and `pnpm pack:all` use) prints one line of progress
// instead of the bundler's hundreds, and the bundler's output only when the build fails.
//
//   node scripts/build.mjs [--force] [--quiet]
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { buildPlan } from './stale-packages.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));

/**
 * Builds what is out of date; resolves with the exit code (0 when everything is built). With
 * `quiet`, the bundler's output is kept and written only if the build fails.
 */
export async function build({ force = false, quiet = false } = {}) {
  const plan = buildPlan(root);
  const stale = plan.filter((p) => force || p.stale);
  if (stale.length === 0) {
    process.stdout.write('The packages are built already (each dist/ is newer than its sources).\n');
    return 0;
  }
  const fresh = plan.filter((p) => !stale.includes(p));
  if (quiet) {
    const what =
      stale.length === plan.length
        ? 'the packages (about a minute on a first run)'
        : `${stale.map((p) => p.name).join(', ')} (the others are built already)`;
    process.stdout.write(`Building ${what}...\n`);
  } else {
    for (const p of stale) process.stdout.write(`build: ${p.name}, ${force ? 'forced' : p.reason}\n`);
    if (fresh.length > 0)
      process.stdout.write(`build: up to date, skipped: ${fresh.map((p) => p.name).join(', ')}\n`);
  }
  // One pnpm run over the selected packages: it keeps their dependency order and builds
  // independent ones side by side.
  const args = ['-r', ...stale.flatMap((p) => ['--filter', `./packages/${p.dir}`]), 'run', 'build'];
  const child = spawn('pnpm', args, {
    cwd: root,
    stdio: quiet ? ['ignore', 'pipe', 'pipe'] : 'inherit',
    shell: process.platform === 'win32',
  });
  const output = [];
  child.stdout?.on('data', (chunk) => output.push(chunk));
  child.stderr?.on('data', (chunk) => output.push(chunk));
  const code = await new Promise((resolve) => {
    child.on('error', (error) => {
      output.push(Buffer.from(`${error.message}\n`));
      resolve(1);
    });
    child.on('close', (exit) => resolve(exit ?? 1));
  });
  if (code !== 0 && quiet) {
    process.stderr.write(Buffer.concat(output));
    process.stderr.write(`\nThe build failed (exit code ${code}); its output is above.\n`);
  }
  return code;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const args = process.argv.slice(2).filter((arg) => arg !== '--');
  const unknown = args.filter((arg) => arg !== '--force' && arg !== '--quiet');
  if (unknown.length > 0) {
    console.error(`build: unknown argument ${unknown[0]}. Usage: pnpm build [--force] [--quiet]`);
    process.exit(2);
  }
  process.exit(await build({ force: args.includes('--force'), quiet: args.includes('--quiet') }));
}
