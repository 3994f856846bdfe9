#!/usr/bin/env node
// `pnpm demo`'s build: the packages are built as `pnpm build` builds them, with one line of
// progress instead of the hundreds of lines the bundler prints; its output is shown only if the
// build fails, so that the demo's own story is what a newcomer reads.
import { spawn } from 'node:child_process';

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
