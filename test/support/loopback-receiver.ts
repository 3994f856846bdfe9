import { once } from 'node:events';
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';

// The one webhook receiver the tests and benchmarks post to: a real HTTP server on loopback, so the
// sender's client connects, writes and reads as it does in production.

/** A request the receiver got. */
export interface ReceivedRequest {
  method: string;
  /** The request target: path and query. */
  url: string;
  headers: IncomingHttpHeaders;
  /** The body as UTF-8 text (empty when the receiver does not record). */
  body: string;
  /** The body's bytes (empty when the receiver does not record). */
  raw: Buffer;
}

/** An answer written as given: `writeHead(status, headers)`, then `body`, after `delayMs`. */
export interface AnswerSpec {
  status: number;
  /** Default: empty. */
  body?: string | Buffer;
  /** Default: none. */
  headers?: Record<string, string>;
  delayMs?: number;
}

/**
 * What the receiver answers: a status (with a `text/plain` body `answered <status>`), an
 * {@link AnswerSpec}, or `'hang'`: hold the response until `open` or `close`.
 */
export type Answer = number | 'hang' | AnswerSpec;

/** An answer, or a function of the request and its number (1 for the first) that picks one. */
export type Respond = Answer | ((request: ReceivedRequest, n: number) => Answer);

export interface LoopbackReceiverOptions {
  /** Default: 200. */
  respond?: Respond;
  /**
   * Answers by hand instead of `respond`, once the body is read: for streamed or trickled bodies
   * and dropped connections.
   */
  handle?: (req: IncomingMessage, res: ServerResponse) => void;
  /** Default: 127.0.0.1 (`::1` listens on IPv6 loopback). */
  host?: string;
  /** Default: 0, any free port. */
  port?: number;
  /** The path of `url`; any path is answered. Default: `/webhooks/`. */
  path?: string;
  /**
   * Default true: keep every request in `received`. False drains bodies unread and keeps nothing
   * (`respond` then sees an empty body), so a benchmark's receiver costs no memory or parsing.
   */
  record?: boolean;
}

/** A webhook receiver on loopback that records every request and answers as told. */
export interface LoopbackReceiver {
  server: Server;
  port: number;
  /** `http://<host>:<port>`. */
  origin: string;
  /** `origin` and the `path` option. */
  url: string;
  /** Requests whose body was read, in order (none when `record` is false). */
  received: ReceivedRequest[];
  /** Requests that arrived, counted as their head arrives. */
  readonly requests: number;
  /** TCP connections accepted. */
  readonly connections: number;
  /** Responses held by `'hang'`. */
  inFlight(): number;
  /** Changes what the next requests get. */
  respond(next: Respond): void;
  /**
   * Answers the held requests with `status`, and every later one too: attempts that are in flight
   * while the test decides, and that finish when it says so.
   */
  open(status: number): void;
  /** Resolves once `n` requests have been read in all. */
  waitFor(n: number): Promise<void>;
  /** Drops held responses and open connections, and stops listening. */
  close(): Promise<void>;
}

const NO_BYTES = Buffer.alloc(0);

function write(res: ServerResponse, answer: number | AnswerSpec): void {
  if (res.destroyed) return;
  if (typeof answer === 'number') {
    res.writeHead(answer, { 'content-type': 'text/plain' }).end(`answered ${answer}`);
  } else {
    res.writeHead(answer.status, answer.headers ?? {}).end(answer.body ?? '');
  }
}

/**
 * Starts a receiver (a real HTTP server on loopback: the client under test connects to it).
 *
 * @example
 * ```ts
 * const receiver = await startLoopbackReceiver({ respond: (_, n) => (n === 1 ? 500 : 200) });
 * await send(receiver.url);
 * expect(receiver.received.map((r) => r.headers['payhook-attempt'])).toEqual(['1', '2']);
 * await receiver.close();
 * ```
 */
export async function startLoopbackReceiver(
  options: LoopbackReceiverOptions = {},
): Promise<LoopbackReceiver> {
  const { handle, host = '127.0.0.1', port = 0, path = '/webhooks/', record = true } = options;
  let current: Respond = options.respond ?? 200;
  const received: ReceivedRequest[] = [];
  const hanging = new Set<ServerResponse>();
  const delayed = new Set<NodeJS.Timeout>();
  const waiters: { n: number; resolve: () => void }[] = [];
  let requests = 0;
  let read = 0;
  let connections = 0;

  const answer = (res: ServerResponse, request: ReceivedRequest) => {
    const chosen = typeof current === 'function' ? current(request, read) : current;
    if (chosen === 'hang') {
      hanging.add(res);
      res.on('close', () => hanging.delete(res));
    } else if (typeof chosen === 'object' && chosen.delayMs) {
      const timer = setTimeout(() => {
        delayed.delete(timer);
        write(res, chosen);
      }, chosen.delayMs);
      delayed.add(timer);
    } else {
      write(res, chosen);
    }
  };

  const server = createServer((req, res) => {
    requests += 1;
    const chunks: Buffer[] = [];
    if (record) req.on('data', (chunk: Buffer) => chunks.push(chunk));
    else req.resume();
    req.on('end', () => {
      read += 1;
      const raw = record ? Buffer.concat(chunks) : NO_BYTES;
      const request: ReceivedRequest = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: record ? raw.toString('utf8') : '',
        raw,
      };
      if (record) received.push(request);
      for (const w of waiters.filter((w) => read >= w.n)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
      if (handle) handle(req, res);
      else answer(res, request);
    });
  });
  server.on('connection', () => {
    connections += 1;
  });
  // Rejects if the port is taken, so a caller can try another.
  server.listen(port, host);
  await once(server, 'listening');
  const bound = (server.address() as AddressInfo).port;
  const origin = `http://${host.includes(':') ? `[${host}]` : host}:${bound}`;

  let closed: Promise<void> | undefined;
  return {
    server,
    port: bound,
    origin,
    url: `${origin}${path}`,
    received,
    get requests() {
      return requests;
    },
    get connections() {
      return connections;
    },
    inFlight: () => hanging.size,
    respond(next) {
      current = next;
    },
    open(status) {
      current = status;
      for (const res of hanging) write(res, status);
      hanging.clear();
    },
    waitFor(n) {
      if (read >= n) return Promise.resolve();
      return new Promise((resolve) => waiters.push({ n, resolve }));
    },
    close() {
      closed ??= (async () => {
        for (const timer of delayed) clearTimeout(timer);
        for (const res of hanging) res.destroy();
        server.closeAllConnections();
        // A closed server emits 'close' again when closed again, so this settles either way.
        const done = once(server, 'close');
        server.close();
        await done;
      })();
      return closed;
    },
  };
}
