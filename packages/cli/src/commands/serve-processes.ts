// `payhook serve --processes <n>`: the sender in several processes on one port, one PostgreSQL.
//
// The primary process makes the schema and the key, then forks <n> sender processes with
// node:cluster. Each runs the whole sender (API, delivery worker, sweeper) and listens on the same
// port, which the primary hands out connection by connection. They share their work through the
// database as instances on several machines do: deliveries are claimed under a lease, each URL's
// concurrency and rate limit are counted in PostgreSQL, so a process that dies loses nothing
// (another takes its claims when their lease lapses) and the primary starts a new one.

import cluster, { type Worker } from 'node:cluster';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { Database, SenderConfig } from '@payhook/sender';
import { CliError, EXIT, type Io } from '../command.js';
import { type LogFormat, say } from '../log-format.js';

/** What a sender process tells the primary. */
type FromProcess = { type: 'listening'; url: string };
/** What the primary tells a sender process. */
type ToProcess = { type: 'stop' };

/** Marks a process forked by `serve --processes`, so that its `serve` runs one sender and no setup. */
export const SERVE_PROCESS_ENV = 'PAYHOOK_SERVE_PROCESS';

/** Whether this process is one of the sender processes of a `serve --processes` primary. */
export const isServeProcess = (env: Io['env']): boolean => cluster.isWorker && env[SERVE_PROCESS_ENV] === '1';

/**
 * How many sender processes `auto` runs: one per core (at most 8), or half the cores (at least one)
 * when PostgreSQL runs on this machine too (a loopback or socket address), since the database needs
 * cores of its own: on two cores shared with PostgreSQL a second process made the p99 at 1,000
 * sessions a second 90 ms instead of 13 (bench/README.md, "latency").
 */
export function autoProcesses(databaseUrl: string): number {
  const cores = Math.min(availableParallelism(), 8);
  return databaseOnThisMachine(databaseUrl) ? Math.max(1, Math.floor(cores / 2)) : cores;
}

/** Whether a PostgreSQL URL names this machine: a loopback host, a Unix socket, or no host. */
export function databaseOnThisMachine(databaseUrl: string): boolean {
  let url: URL;
  try {
    url = new URL(databaseUrl);
  } catch {
    return true; // a libpq key=value string or a socket path: this machine, most likely
  }
  const host = (url.searchParams.get('host') ?? url.hostname).replace(/^\[|\]$/g, '');
  return host === '' || host.startsWith('/') || host === 'localhost' || host === '::1' || /^127\./.test(host);
}

/**
 * How many sender processes to run: `--processes` (or `PAYHOOK_PROCESSES`), a number or `auto`
 * ({@link autoProcesses}). PostgreSQL defaults to `auto`; PGlite's directory belongs to one
 * process, so it takes 1 only.
 */
export function processCount(asked: string | undefined, databaseUrl: string | undefined): number {
  const onPostgres = databaseUrl !== undefined;
  if (asked === undefined || asked === '') return databaseUrl !== undefined ? autoProcesses(databaseUrl) : 1;
  const count =
    asked === 'auto'
      ? databaseUrl !== undefined
        ? autoProcesses(databaseUrl)
        : 1
      : /^[1-9]\d{0,2}$/.test(asked)
        ? Number(asked)
        : Number.NaN;
  if (Number.isNaN(count) || count > 256) {
    throw new CliError(
      `--processes (PAYHOOK_PROCESSES) takes a number from 1 to 256 or "auto", not ${JSON.stringify(asked)}.`,
    );
  }
  if (count > 1 && !onPostgres) {
    throw new CliError(
      `--processes ${asked} needs PostgreSQL (--database-url): PGlite's data directory is one process's. Run PGlite with --processes 1.`,
    );
  }
  return count;
}

/** What {@link fitProcesses} decided: how many processes run, and what to say about it. */
export interface FittedProcesses {
  processes: number;
  /** Why `auto` runs fewer, or why the number asked for may run out of connections. */
  note?: { text: string; fields: Record<string, number> };
}

/**
 * Fits the sender processes to the connections the server has free (`room`, read at the start):
 * each opens up to `perProcess`. `auto` (the default) runs no more than fit, one at least, and
 * says so when that is fewer than the cores would give; a number asked for is run as asked, with
 * a warning when it may open more than fit (behind a connection pooler the server's count is not
 * the limit, so an explicit number is not refused).
 */
export function fitProcesses(
  wanted: number,
  auto: boolean,
  perProcess: number,
  room: { max: number; reserved: number; inUse: number } | undefined,
): FittedProcesses {
  if (!room) return { processes: wanted };
  const free = room.max - room.reserved - room.inUse;
  const fit = Math.max(0, Math.floor(free / perProcess));
  if (wanted <= fit) return { processes: wanted };
  const fields = { ...room, free, perProcess };
  const server = `the server's max_connections is ${room.max} (${room.reserved} reserved, ${room.inUse} open): ${free} free, and each process opens up to ${perProcess} (PAYHOOK_DB_POOL_SIZE + 6)`;
  if (auto && wanted > 1) {
    const processes = Math.max(1, fit);
    const short = fit < 1 ? ' Even one may run out: requests then answer 503 until connections free up.' : '';
    return {
      processes,
      note: {
        text: `Running ${processes} sender process${processes > 1 ? 'es' : ''}, not ${wanted}: ${server}.${short} Raise max_connections or lower PAYHOOK_DB_POOL_SIZE for more.`,
        fields: { ...fields, processes, wanted },
      },
    };
  }
  return {
    processes: wanted,
    note: {
      text: `${wanted} sender process${wanted > 1 ? 'es' : ''} may open ${wanted * perProcess} connections, and ${server}: past that, requests answer 503 until connections free up. Lower --processes or PAYHOOK_DB_POOL_SIZE, or raise max_connections.`,
      fields: { ...fields, processes: wanted },
    },
  };
}

/**
 * {@link fitProcesses} against the server behind `database`: `asked` is what `--processes` or
 * PAYHOOK_PROCESSES said, `wanted` what {@link processCount} made of it. Nothing to fit on PGlite,
 * or with no database given (a process of `--processes`, whose primary fitted their number).
 */
export async function fitToServer(
  database: Database | undefined,
  wanted: number,
  asked: string | undefined,
  config: Pick<SenderConfig, 'databasePoolSize'>,
): Promise<FittedProcesses> {
  if (database?.kind !== 'postgres') return { processes: wanted };
  const { connectionRoom, connectionsPerProcess } = await import('@payhook/sender');
  const auto = asked === undefined || asked === '' || asked === 'auto';
  const perProcess = connectionsPerProcess(config.databasePoolSize);
  return fitProcesses(wanted, auto, perProcess, await connectionRoom(database));
}

/** The sender processes of a primary, once they all listen. */
export interface ServeProcesses {
  /** The address they share. */
  url: string;
  count: number;
  /** Asks each process to finish its deliveries in flight and stop; resolves once all exited. */
  stop(): Promise<void>;
}

/**
 * Forks `count` sender processes running `payhook serve <argv>` and resolves once every one listens.
 * A process that exits before then fails the start (its own error is on standard error); one that
 * exits later is replaced after a second (longer, up to 30 s, while replacements keep dying within
 * 10 s of their start), unless the primary is stopping.
 */
export async function startServeProcesses(
  count: number,
  argv: readonly string[],
  format: LogFormat,
  io: Io,
): Promise<ServeProcesses> {
  // The command's own file: `dist/cli.js` as built (serve is bundled into it).
  cluster.setupPrimary({
    exec: fileURLToPath(import.meta.url),
    args: ['serve', ...argv, '--log-format', format],
  });
  const env = { ...io.env, [SERVE_PROCESS_ENV]: '1' };
  const live = new Set<Worker>();
  /** Those of `live` that listen: they stop when asked; one still starting is sent SIGTERM. */
  const listening = new Set<Worker>();
  let stopping = false;
  let started = false;
  // Any process that exits before every one listens fails the start.
  let failStart: (error: Error) => void = () => undefined;
  const startFailed = new Promise<never>((_, reject) => {
    failStart = reject;
  });
  startFailed.catch(() => undefined);
  // A process that keeps dying at its start (its database away) is restarted less and less often.
  let restartMs = 1000;

  const fork = (): Promise<string> => {
    const worker = cluster.fork(env);
    const forkedAt = Date.now();
    live.add(worker);
    worker.once('exit', (code, signal) => {
      live.delete(worker);
      listening.delete(worker);
      const how = signal ? `signal ${signal}` : `code ${code}`;
      if (!started) {
        failStart(
          new CliError(`A sender process exited at its start (${how}); its error is above.`, EXIT.error),
        );
        return;
      }
      if (stopping) return;
      restartMs = Date.now() - forkedAt < 10_000 ? Math.min(2 * restartMs, 30_000) : 1000;
      say(format, io, `A sender process (pid ${worker.process.pid}) exited with ${how}: starting another.`, {
        pid: worker.process.pid,
        exit: how,
      });
      setTimeout(() => {
        if (!stopping) fork().catch(() => undefined);
      }, restartMs).unref();
    });
    return new Promise((resolve) => {
      worker.on('message', (message: FromProcess) => {
        if (message?.type !== 'listening') return;
        listening.add(worker);
        resolve(message.url);
      });
    });
  };

  const stop = async () => {
    stopping = true;
    await Promise.all(
      [...live].map(
        (worker) =>
          new Promise<void>((resolve) => {
            if (worker.isDead()) return resolve();
            worker.once('exit', () => resolve());
            // One still starting may not hear a message yet, and holds no delivery to finish.
            if (!listening.has(worker)) worker.process.kill('SIGTERM');
            // One already stopping on its own Ctrl-C may have closed its channel.
            else if (worker.isConnected()) worker.send({ type: 'stop' } satisfies ToProcess, () => undefined);
          }),
      ),
    );
  };

  try {
    // One after the other: each opens its pool and finds the schema made.
    let url = '';
    for (let i = 0; i < count; i++) url = await Promise.race([fork(), startFailed]);
    started = true;
    return { url, count, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** In a sender process: tells the primary where it listens. */
export function reportListening(url: string): void {
  process.send?.({ type: 'listening', url } satisfies FromProcess);
}

/**
 * In a sender process: resolves when the primary asks it to stop, or goes away (the primary was
 * killed: a process without it stops too).
 */
export function untilPrimaryStops(): Promise<void> {
  return new Promise((resolve) => {
    process.on('message', (message: ToProcess) => {
      if (message?.type === 'stop') resolve();
    });
    process.once('disconnect', () => resolve());
  });
}
