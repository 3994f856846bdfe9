import { connect } from 'node:net';

/** What a client that wrote its whole request before reading got back. */
export interface RawExchange {
  /** The response status, if a response head arrived. */
  status: number | undefined;
  /** Response headers, names lower-cased. */
  headers: Record<string, string>;
  /** The response body (as far as it arrived). */
  body: string;
  /** The error the writes ended with (EPIPE, ECONNRESET) or undefined if every byte was written. */
  writeError: string | undefined;
  /** An error of the connection after the writes, if any. */
  readError: string | undefined;
}

/** Options of {@link writeThenRead}. */
export interface RawRequest {
  /** Base URL, such as http://127.0.0.1:PORT */
  url: string;
  path?: string;
  body: Buffer;
  /** Send the body chunked (in 64 KiB chunks) rather than with a Content-Length. */
  chunked?: boolean;
  /** A Content-Length to declare instead of the body's own (then `chunked` is ignored). */
  declaredLength?: number;
  /** The Content-Type line's value, sent verbatim (default `application/json`); null sends none. */
  contentType?: string | null;
  headers?: Record<string, string>;
}

/**
 * Sends one HTTP/1.1 request over a raw socket the way many clients do: the head and the whole
 * body are written first, and only once every write has completed (or failed) is the response
 * read. Resolves when the server closes the connection. A server that answers early and closes
 * while body bytes are still unread makes these writes fail with a reset, and the response is lost.
 */
export function writeThenRead(request: RawRequest): Promise<RawExchange> {
  const url = new URL(request.url);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const chunked = request.declaredLength === undefined && request.chunked === true;
  const head = [
    `POST ${request.path ?? '/webhooks'} HTTP/1.1`,
    `Host: ${url.host}`,
    ...(request.contentType === null ? [] : [`Content-Type: ${request.contentType ?? 'application/json'}`]),
    chunked
      ? 'Transfer-Encoding: chunked'
      : `Content-Length: ${request.declaredLength ?? request.body.length}`,
    ...Object.entries(request.headers ?? {}).map(([name, value]) => `${name}: ${value}`),
    '',
    '',
  ].join('\r\n');
  return new Promise<RawExchange>((resolve) => {
    const socket = connect({ host, port: Number(url.port) });
    const received: Buffer[] = [];
    let writeError: string | undefined;
    let readError: string | undefined;
    let written = false;
    socket.pause();
    socket.on('error', (error: NodeJS.ErrnoException) => {
      const code = error.code ?? error.message;
      if (written) readError ??= code;
      else writeError ??= code;
    });
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    socket.on('close', () => resolve(parse(Buffer.concat(received), writeError, readError)));
    const done = (error?: Error | null) => {
      if (error) writeError ??= (error as NodeJS.ErrnoException).code ?? error.message;
      written = true;
      // Only now is anything read.
      socket.resume();
    };
    socket.once('connect', () => {
      socket.write(head);
      if (!chunked) {
        socket.write(request.body, done);
        return;
      }
      const size = 64 * 1024;
      for (let at = 0; at < request.body.length; at += size) {
        const part = request.body.subarray(at, Math.min(at + size, request.body.length));
        socket.write(`${part.length.toString(16)}\r\n`);
        socket.write(part);
        socket.write('\r\n');
      }
      socket.write('0\r\n\r\n', done);
    });
  });
}

function parse(raw: Buffer, writeError: string | undefined, readError: string | undefined): RawExchange {
  const text = raw.toString('latin1');
  const end = text.indexOf('\r\n\r\n');
  if (end === -1) return { status: undefined, headers: {}, body: '', writeError, readError };
  const [statusLine = '', ...lines] = text.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const status = Number(statusLine.split(' ')[1]);
  let body = raw.subarray(Buffer.byteLength(text.slice(0, end + 4), 'latin1'));
  const length = headers['content-length'];
  if (length !== undefined) body = body.subarray(0, Number(length));
  return {
    status: Number.isInteger(status) ? status : undefined,
    headers,
    body: body.toString('utf8'),
    writeError,
    readError,
  };
}

/** A body of `size` bytes that starts like an event and is padded with `x`. */
export function oversizedBody(size: number): Buffer {
  const body = Buffer.alloc(size, 'x');
  body.write('{"event":"payment.session.created","data":"');
  return body;
}
