/** A function that keeps a serverless instance alive until the promise settles. */
export type WaitUntil = (promise: Promise<unknown>) => void;

/** What the platform's arguments after the request tell about the request. */
export interface PlatformFacts {
  /** The platform's `waitUntil` (Workers' `ctx`, Hono's `c.executionCtx`), bound to its owner. */
  waitUntil: WaitUntil | undefined;
  /** The connection's peer address (Bun's server, Deno's `info`, `@hono/node-server`'s socket). */
  address: string | undefined;
  /** The Node socket under the request (`@hono/node-server`), kept open while a refused body drains. */
  socket: unknown;
}

type Bag = Record<string, unknown>;

const isObject = (value: unknown): value is Bag =>
  (typeof value === 'object' || typeof value === 'function') && value !== null;

const text = (value: unknown): string | undefined =>
  typeof value === 'string' && value.length > 0 ? value : undefined;

/** A property read that may throw (Hono's `c.executionCtx` throws where there is none). */
function read(from: Bag, name: string): unknown {
  try {
    return from[name];
  } catch {
    return undefined;
  }
}

/** The peer address one argument carries, if it is one of the shapes the platforms pass. */
function addressOf(arg: Bag, request: Request): string | undefined {
  // Bun: `Bun.serve({ fetch })` calls fetch(request, server); server.requestIP(request).
  const requestIP = read(arg, 'requestIP');
  if (typeof requestIP === 'function') {
    try {
      const info: unknown = requestIP.call(arg, request);
      if (isObject(info)) return text(info.address);
    } catch {
      // A server that cannot tell (the request is not its own): no address from it.
    }
    return undefined;
  }
  // Deno: `Deno.serve(handler)` calls handler(request, info); info.remoteAddr.hostname.
  const remoteAddr = read(arg, 'remoteAddr');
  if (isObject(remoteAddr)) return text(remoteAddr.hostname);
  // Node through @hono/node-server: the second argument (Hono's c.env) is { incoming, outgoing }.
  const incoming = read(arg, 'incoming');
  if (isObject(incoming) && isObject(incoming.socket)) return text(incoming.socket.remoteAddress);
  return undefined;
}

/** Whether `arg` is a Hono `Context` (`c`): its request, its env and its execution context. */
const isHonoContext = (arg: Bag): boolean =>
  isObject(read(arg, 'req')) && 'env' in arg && typeof read(arg, 'json') === 'function';

/**
 * Reads what the arguments a platform passes after the request tell: a `waitUntil` (Workers'
 * `ctx`, the third argument of `fetch(request, env, ctx)`) and the peer address (Bun's server,
 * Deno's `info`, `@hono/node-server`'s `{ incoming }`, whose socket it keeps too). A Hono context `c` is looked into: its
 * `env` (which is one of those under Bun, Deno and `@hono/node-server`) and its `executionCtx`
 * (Workers). Anything else (Next.js's `{ params }`, a Worker's `env`) tells nothing.
 */
export function inspectPlatform(request: Request, args: readonly unknown[]): PlatformFacts {
  let waitUntil: WaitUntil | undefined;
  let address: string | undefined;
  let socket: unknown;
  const look = (arg: unknown, depth: number) => {
    if (!isObject(arg)) return;
    if (depth === 0 && isHonoContext(arg)) {
      look(read(arg, 'executionCtx'), 1);
      look(read(arg, 'env'), 1);
      return;
    }
    const found = read(arg, 'waitUntil');
    if (waitUntil === undefined && typeof found === 'function') {
      waitUntil = (promise) => found.call(arg, promise);
    }
    address ??= addressOf(arg, request);
    const incoming = read(arg, 'incoming');
    if (socket === undefined && isObject(incoming)) socket = incoming.socket;
  };
  for (const arg of args) look(arg, 0);
  return { waitUntil, address, socket };
}

/**
 * The address Cloudflare's edge gives, `CF-Connecting-IP`: read only when the handler is told it
 * runs behind Cloudflare (`trustCloudflare: true`) or finds the Workers runtime's `request.cf`,
 * which no client can set.
 */
export function cloudflareAddress(request: Request, trust: boolean | undefined): string | undefined {
  const onWorkers = isObject((request as Request & { cf?: unknown }).cf);
  if (!(trust ?? onWorkers)) return undefined;
  return text(request.headers.get('cf-connecting-ip')?.trim());
}
