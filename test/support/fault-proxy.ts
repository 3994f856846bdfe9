import { createConnection, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy of the test's own between a client and a server (Redis, the sender), to cut the
 * connection without touching the server: `blackhole()` keeps connections open but passes
 * nothing (a network partition: requests time out), `drop()` closes them and refuses new ones,
 * `restore()` passes traffic again.
 */
export interface FaultProxy {
  /** `<scheme>://127.0.0.1:<port>`: the address to give the client. */
  url: string;
  port: number;
  blackhole(): void;
  drop(): void;
  restore(): void;
  close(): Promise<void>;
}

export async function startProxy(
  target: { host: string; port: number },
  scheme: 'redis' | 'http' = 'redis',
): Promise<FaultProxy> {
  let mode: 'pass' | 'blackhole' | 'drop' = 'pass';
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
    client.on('data', (chunk) => {
      if (mode === 'pass') upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (mode === 'pass') client.write(chunk);
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
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
