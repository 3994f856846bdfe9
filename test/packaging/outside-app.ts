import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { expect } from 'vitest';

// An app outside the workspace, as a merchant has one: installed with npm, started with node,
// sent signed events by the repository's own `payhook trigger`.

// Quiet, and from npm's cache where it can. A lookup of @payhook/* in a registry would fail: the
// scope points at a closed port, so a passing install took every @payhook package from a tarball.
export const NPM_FLAGS = [
  '--no-audit',
  '--no-fund',
  '--prefer-offline',
  '--loglevel=error',
  '--@payhook:registry=http://127.0.0.1:9/',
];

/**
 * Runs `node index.mjs` in an app; resolves once it prints a line matching `ready` (its port the
 * first group), with the port and its output by line.
 */
export async function startApp(cwd: string, env: Record<string, string>, ready: RegExp) {
  const child = spawn(process.execPath, ['index.mjs'], { cwd, env: { ...process.env, ...env } });
  const lines: string[] = [];
  let stderr = '';
  const waiting = new Set<() => void>();
  let partial = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    const parts = (partial + chunk).split('\n');
    partial = parts.pop() ?? '';
    lines.push(...parts);
    for (const wake of waiting) wake();
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const line = (pattern: RegExp) =>
    new Promise<string>((resolve, reject) => {
      const check = () => {
        const found = lines.find((l) => pattern.test(l));
        if (found === undefined) return;
        waiting.delete(check);
        resolve(found);
      };
      waiting.add(check);
      check();
      void exited.then((code) => reject(new Error(`the app exited (${code}) before ${pattern}: ${stderr}`)));
    });
  const port = Number(ready.exec(await line(ready))?.[1]);
  return {
    port,
    line,
    stderr: () => stderr,
    /** SIGTERM: the app closes its server and its receiver, then exits on its own. */
    stop: async () => {
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    },
  };
}

/** `payhook trigger <event> --to <app>/webhooks`, signed with the secret: what the app answered. */
export async function trigger(cli: string, port: number, businessId: string, secret: string) {
  const sent = await promisify(execFile)(process.execPath, [
    cli,
    'trigger',
    'payment.session.succeeded',
    '--to',
    `http://127.0.0.1:${port}/webhooks`,
    '--business-id',
    businessId,
    '--secret',
    secret,
    '--json',
  ]);
  return JSON.parse(sent.stdout) as { status: number; body: unknown; payload: { data: { id: string } } };
}
