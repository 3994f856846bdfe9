import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { createReceiver, type ReceiverOptions } from '@payhook/core';
import { payhook } from '@payhook/express';
import express from 'express';

/** The built command, run as a user runs it: a process, its output and its exit code. */
export const bin = fileURLToPath(new URL('../dist/cli.js', import.meta.url));

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The environment to run the command in: the caller's, without the variables a package manager's
 * script sets (`npm_lifecycle_event`, `npm_config_user_agent`: tests run under `pnpm test` have
 * them), which change how the command writes the command lines it prints; a test that wants them
 * sets them in `env`, which goes over the rest.
 */
export function cliEnv(env: Record<string, string> = {}): NodeJS.ProcessEnv {
  const inherited = { ...process.env };
  delete inherited.npm_lifecycle_event;
  delete inherited.npm_config_user_agent;
  return { ...inherited, ...env };
}

/** Runs `payhook <args>` with `input` on standard input; resolves when it exits. */
export function payhookCli(
  args: string[],
  options: { input?: string; env?: Record<string, string> } = {},
): Promise<Run> {
  const child = spawn(process.execPath, [bin, ...args], {
    env: cliEnv({ NO_COLOR: '1', ...options.env }),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c) => (stdout += c));
  child.stderr.on('data', (c) => (stderr += c));
  child.stdin.end(options.input ?? '');
  return once(child, 'exit').then(([code]) => ({ code: code as number | null, stdout, stderr }));
}

/** A process and everything it printed so far. */
export interface Started {
  child: ChildProcess;
  out: string;
  err: string;
}

/** Collects what `child` prints. */
export function started(child: ChildProcess): Started {
  const run: Started = { child, out: '', err: '' };
  child.stdout?.on('data', (c) => (run.out += c));
  child.stderr?.on('data', (c) => (run.err += c));
  return run;
}

/** Its exit code, once it has exited. */
/** The child processes of `pid` (the sender processes a `serve --processes` primary runs). */
export const childrenOf = (pid: number | undefined): number[] => {
  try {
    return execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
      .trim()
      .split('\n')
      .map(Number);
  } catch {
    return []; // pgrep exits 1 when there are none
  }
};

/**
 * Runs `test` against a started `serve`: a failure carries the end of what serve printed, and the
 * process is killed at the end whatever happened.
 */
export async function whileServing(serve: Started, test: () => Promise<void>): Promise<void> {
  try {
    await test();
  } catch (error) {
    (error as Error).message +=
      `\n--- payhook serve printed:\n${serve.out.slice(-4000)}${serve.err.slice(-2000)}`;
    throw error;
  } finally {
    serve.child.kill('SIGKILL');
  }
}

export const exitCode = async (child: ChildProcess): Promise<number | null> =>
  child.exitCode ?? (await once(child, 'exit'))[0];

/**
 * Stops a `payhook serve` the way a supervisor does: SIGTERM, which lets deliveries in flight
 * finish for up to the shutdown grace (10 s by default) and then closes the database, and SIGKILL
 * if it is still running `killAfterMs` later. An afterAll that calls it needs a timeout above
 * `killAfterMs`, not vitest's default 10 s.
 */
export async function stopServe(run: Started, killAfterMs = 30_000): Promise<void> {
  if (run.child.exitCode !== null || run.child.signalCode !== null) return;
  run.child.kill('SIGTERM');
  const timer = setTimeout(() => run.child.kill('SIGKILL'), killAfterMs);
  try {
    await exitCode(run.child);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `payhook serve --port 0 --data-dir <dataDir> --business-id <businessId> <flags>` piped (JSON
 * lines), with `env` over the caller's (see {@link cliEnv}); resolves once it is ready, with its
 * URL and the test key its first start made. A `dataDir` of `postgres://...` is given as
 * `--database-url` instead.
 */
export async function startServe(
  dataDir: string,
  businessId: string,
  flags: string[] = [],
  env: Record<string, string> = {},
): Promise<Started & { url: string; apiKey: string }> {
  const run = started(
    spawn(
      process.execPath,
      [
        bin,
        'serve',
        '--port',
        '0',
        dataDir.startsWith('postgres://') ? '--database-url' : '--data-dir',
        dataDir,
        '--business-id',
        businessId,
        '--log-format',
        'json',
        ...flags,
      ],
      { env: cliEnv(env), stdio: ['ignore', 'pipe', 'pipe'] },
    ),
  );
  // The last line of the start: the command that registers a receiver's URL (`payhook endpoints
  // add`, or as the package manager's script that ran it: `pnpm -s payhook endpoints add`, ...).
  for (let waited = 0; !run.out.includes(' endpoints add http'); waited += 100) {
    if (waited > 150_000 || run.child.exitCode !== null) {
      run.child.kill('SIGKILL');
      throw new Error(`payhook serve did not start:\n${run.out}${run.err}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return Object.assign(run, {
    url: /"url":"(http:[^"]+)"/.exec(run.out)?.[1] as string,
    apiKey: /"apiKey":"(sk_test_[^"]+)"/.exec(run.out)?.[1] as string,
  });
}

/** A payhook receiver on Express over loopback, for `trigger` to send to; it records what it handled. */
export async function startTriggerReceiver(options: Partial<ReceiverOptions> & { businessIds: string[] }) {
  const receiver = createReceiver({ allowedIps: ['127.0.0.1', '::1'], ...options });
  const handled: string[] = [];
  receiver.onAny((event) => {
    handled.push(event.event);
  });
  const app = express();
  app.use('/webhooks', payhook(receiver));
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks/`,
    handled,
    close() {
      server.closeAllConnections();
      server.close();
    },
  };
}
