import { createConnection, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy of the test's own between a client and a server (Redis, the sender), to cut the
 * connection without touching the server: `blackhole()` keeps connections open but passes
 * nothing (a network partition: requests time out), `drop()` closes them and refuses new ones,
 * `restore()` passes traffic again. `delay(ms)` holds every chunk that long, each way, in order (a
 * database farther away than loopback).
 */
export interface FaultProxy {
  /** `<scheme>://127.0.0.1:<port>`: the address to give the client. */
  url: string;
  port: number;
  blackhole(): void;
  drop(): void;
  restore(): void;
  /** Holds each chunk `ms` before passing it on, in both directions (0: at once, as at the start). */
  delay(ms: number): void;
  /**
   * Drops, from now on, what the server sends on the connections open now (their requests still
   * reach it: a statement runs and commits, its answer is lost); new connections pass as usual.
   */
  muteOpenConnections(): void;
  close(): Promise<void>;
}

export async function startProxy(
  target: { host: string; port: number },
  scheme: 'redis' | 'http' | 'postgres' = 'redis',
): Promise<FaultProxy> {
  let mode: 'pass' | 'blackhole' | 'drop' = 'pass';
  let delayMs = 0;
  /** Upstream sockets whose answers are dropped (`muteOpenConnections`). */
  const muted = new WeakSet<Socket>();
  const upstreams = new Set<Socket>();
  /** Passes `chunk` to `to` after the delay; timers of one delay fire in order, so chunks do too. */
  const pass = (to: Socket, chunk: Buffer) => {
    if (delayMs === 0) to.write(chunk);
    else
      setTimeout(() => {
        if (!to.destroyed) to.write(chunk);
      }, delayMs);
  };
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    if (mode === 'drop') {
      client.destroy();
      return;
    }
    const upstream = createConnection(target);
    sockets.add(client);
    sockets.add(upstream);
    const forget = () => {
      sockets.delete(client);
      sockets.delete(upstream);
      client.destroy();
      upstream.destroy();
    };
    client.on('data', (chunk: Buffer) => {
      if (mode === 'pass') pass(upstream, chunk);
    });
    upstreams.add(upstream);
    upstream.on('close', () => upstreams.delete(upstream));
    upstream.on('data', (chunk: Buffer) => {
      if (mode === 'pass' && !muted.has(upstream)) pass(client, chunk);
    });
    client.on('close', forget);
    upstream.on('close', forget);
    client.on('error', forget);
    upstream.on('error', forget);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `${scheme}://127.0.0.1:${port}`,
    port,
    blackhole: () => {
      mode = 'blackhole';
    },
    drop: () => {
      mode = 'drop';
      for (const socket of sockets) socket.destroy();
    },
    restore: () => {
      mode = 'pass';
    },
    delay: (ms) => {
      delayMs = ms;
    },
    muteOpenConnections: () => {
      for (const upstream of upstreams) muted.add(upstream);
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
