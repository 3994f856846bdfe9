import { once } from 'node:events';
import { type AddressInfo, createServer } from 'node:net';

/**
 * A port on `host` that nothing listens on: found by listening on port 0 and closing again. For a
 * process that must be told its port before it starts, or a URL that must refuse connections.
 *
 * @example
 * ```ts
 * const port = await freePort();
 * spawn(process.execPath, ['server.mjs'], { env: { ...process.env, PORT: String(port) } });
 * ```
 */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  const server = createServer().listen(0, host);
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const closed = once(server, 'close');
  server.close();
  await closed;
  return port;
}
