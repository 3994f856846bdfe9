import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from './free-port.js';

/** A `redis-server` process of a test's own, on a loopback port and in its own directory. */
export interface RedisProcess {
  readonly port: number;
  readonly url: string;
  /** Where its append-only file and snapshots live: kept across `kill` and `start`. */
  readonly dir: string;
  /** Kills the server with SIGKILL (no shutdown save, no AOF rewrite), as a crash would. */
  kill(): Promise<void>;
  /** Starts it again on the same port and directory (after `kill`). */
  start(): Promise<void>;
  /** Stops it and removes its directory. */
  destroy(): Promise<void>;
}

/** Options of {@link startRedisServer}: the server's persistence and replication settings. */
export interface RedisServerOptions {
  /** `appendonly yes` with this `appendfsync`; without it, no AOF (Redis's default). */
  appendfsync?: 'always' | 'everysec' | 'no';
  /** Makes it a replica of this server. */
  replicaOf?: RedisProcess;
  /**
   * More command-line settings, such as `['--rename-command', 'CONFIG', '']`; or a function that
   * makes them for each attempt to start (a setting that names a free port of its own).
   */
  args?: string[] | (() => Promise<string[]>);
}

/**
 * Starts a `redis-server` on a free loopback port, in a temporary directory, with no snapshots
 * (`save ""`) and AOF only as asked: never the shared test server, so a test may kill it. Fails
 * with a clear message when `redis-server` is not installed.
 *
 * @example
 * ```ts
 * const server = await startRedisServer({ appendfsync: 'always' });
 * await server.kill();
 * await server.start(); // the same data directory: what the AOF kept is back
 * ```
 */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisProcess> {
  // A free port can be taken by another process between the look and the server's bind (tests
  // run side by side): a server that exits at start is tried again on another port.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnFreePort(options);
    } catch (error) {
      if (attempt === 5 || !(error instanceof ExitedAtStart)) throw error;
    }
  }
}

class ExitedAtStart extends Error {}

async function startOnFreePort(options: RedisServerOptions): Promise<RedisProcess> {
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), 'payhook-redis-'));
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--save',
    '',
    '--appendonly',
    options.appendfsync ? 'yes' : 'no',
    ...(options.appendfsync ? ['--appendfsync', options.appendfsync] : []),
    ...(options.replicaOf ? ['--replicaof', '127.0.0.1', String(options.replicaOf.port)] : []),
    ...(typeof options.args === 'function' ? await options.args() : (options.args ?? [])),
    '--logfile',
    join(dir, 'redis.log'),
  ];
  let child: ChildProcess | undefined;

  async function start(): Promise<void> {
    const started = spawn('redis-server', args, { stdio: 'ignore' });
    const failed = once(started, 'error').then(([error]) => {
      throw new Error(
        `Cannot start redis-server (${(error as Error).message}): the tests that start their own Redis need it installed (the redis-server package on Debian).`,
      );
    });
    child = started;
    await Promise.race([failed, waitForPing(port, started)]);
  }

  async function kill(): Promise<void> {
    const current = child;
    if (!current || current.exitCode !== null || current.signalCode !== null) return;
    const exited = once(current, 'exit');
    current.kill('SIGKILL');
    await exited;
  }

  try {
    await start();
  } catch (error) {
    await kill();
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    dir,
    kill,
    start,
    async destroy() {
      await kill();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

async function waitForPing(port: number, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null)
      throw new ExitedAtStart(`redis-server on port ${port} exited at start (${child.exitCode}).`);
    const probe = new Redis(port, '127.0.0.1', {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    probe.on('error', () => {});
    try {
      await probe.connect();
      // A restarted server answers LOADING while it replays its AOF: wait for PONG.
      if ((await probe.ping()) === 'PONG') return;
    } catch {
      // not listening yet, or still loading
    } finally {
      probe.disconnect();
    }
    if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not answer within 10 s.`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
