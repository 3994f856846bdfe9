import type { Readable } from 'node:stream';
import { PayhookError } from '../errors.js';

/** The parts of a Node request that {@link readRawBody} reads. */
export type BodyStream = Pick<Readable, 'on' | 'off' | 'pause' | 'resume'> & {
  /** The request's headers: a `Content-Length` over the limit is refused before a byte is read. */
  headers?: Record<string, string | string[] | undefined>;
  /** The request's connection (a Node request has one): kept open while an oversized body drains. */
  socket?: unknown;
};

/**
 * Bodies over the limit are still read (and thrown away) up to this size in all, 32 MiB, or
 * twice the body limit when that is larger: see {@link readRawBody}.
 */
export const DEFAULT_MAX_DRAIN_BYTES = 32 * 1024 * 1024;

/** The drain cap that applies when none is given: 32 MiB, or twice `maxBodyBytes` if larger. */
export function defaultMaxDrainBytes(maxBodyBytes: number): number {
  return Math.max(DEFAULT_MAX_DRAIN_BYTES, 2 * maxBodyBytes);
}

/**
 * Validates a `maxDrainBytes` option against the body limit, for a receiver to call at creation:
 * `undefined` gives the default ({@link defaultMaxDrainBytes}); `0` turns draining off (an
 * oversized body is answered at once and its connection closed); anything else must be a finite
 * number of bytes no smaller than `maxBodyBytes`. Throws a TypeError that names the bad value.
 *
 * @example
 * ```ts
 * resolveMaxDrainBytes(undefined, 1024 * 1024); // 33554432
 * resolveMaxDrainBytes(512, 1024 * 1024); // TypeError
 * ```
 */
export function resolveMaxDrainBytes(value: number | undefined, maxBodyBytes: number): number {
  if (value === undefined) return defaultMaxDrainBytes(maxBodyBytes);
  if (
    typeof value !== 'number' ||
    !Number.isFinite(value) ||
    value < 0 ||
    (value !== 0 && value < maxBodyBytes)
  ) {
    throw new TypeError(
      `Invalid maxDrainBytes: ${String(value)} (expected 0, or a number of bytes no smaller than maxBodyBytes, ${maxBodyBytes}).`,
    );
  }
  return value;
}

/**
 * Reads a request body into one Buffer, refusing it with `payload_too_large` (413) as soon as it
 * passes `maxBytes`: a `Content-Length` above the limit is refused before a byte is read, and a
 * chunked body at the first chunk past the limit. Answer the refusal at once, with
 * `Connection: close`.
 *
 * The rest of a refused body is then read and thrown away, and the connection is closed only once
 * it has all arrived, so that a client that writes its whole body before it reads the response
 * (as many HTTP clients do) sees the 413 rather than a reset connection. That goes on while the
 * body stays within `maxDrainBytes` in all (default: {@link defaultMaxDrainBytes}, 32 MiB); a
 * body declared larger, or one that grows past it, is not read further and its connection is
 * closed as soon as the 413 is written. `0` turns draining off.
 *
 * @example
 * ```ts
 * const rawBody = await readRawBody(req, 1024 * 1024);
 * ```
 */
export function readRawBody(req: BodyStream, maxBytes: number, maxDrainBytes?: number): Promise<Buffer> {
  const declared = req.headers?.['content-length'];
  if (typeof declared === 'string' && Number(declared) > maxBytes) {
    const cap = maxDrainBytes ?? defaultMaxDrainBytes(maxBytes);
    // A declared length past the cap is not worth reading: the connection closes after the 413.
    if (Number(declared) > cap) req.pause();
    else discardRest(req, 0, cap);
    return Promise.reject(tooLarge(maxBytes));
  }
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    const onData = (chunk: Buffer | string) => {
      const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      total += buf.length;
      if (total > maxBytes) {
        // Nothing more is kept: the rest goes to discardRest, which counts it against the cap.
        req.off('data', onData);
        discardRest(req, total, maxDrainBytes ?? defaultMaxDrainBytes(maxBytes));
        reject(tooLarge(maxBytes));
        return;
      }
      chunks.push(buf);
    };
    // The listeners stay once the body is read: the request is over, and taking four listeners
    // off again cost more per request than they ever will. A later 'end' or 'error' settles
    // nothing. An aborted request emits 'error' (Node 16 and later), so 'aborted' needs no listener.
    req.on('data', onData);
    req.on('end', () => resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, total)));
    req.on('error', (error: Error) =>
      reject(new PayhookError('malformed_payload', 'The request body could not be read.', { cause: error })),
    );
    req.resume();
  });
}

/** A Node socket as Node's HTTP server closes it after a `Connection: close` response. */
interface ClosingSocket {
  destroySoon: () => void;
}

function isClosingSocket(socket: unknown): socket is ClosingSocket {
  return (
    typeof socket === 'object' &&
    socket !== null &&
    typeof (socket as { destroySoon?: unknown }).destroySoon === 'function'
  );
}

/**
 * Reads and throws away the rest of a refused body, `received` bytes of which have arrived, while
 * the whole stays within `cap` bytes. Only refused requests come here, so the listeners it adds
 * cost the accepted ones nothing.
 *
 * Node's HTTP server ends a `Connection: close` response by calling the socket's `destroySoon()`,
 * which destroys the socket once the response is flushed: with body bytes still unread, the kernel
 * then answers with a reset, and a client still writing loses the 413. So while the body drains,
 * that call on this one socket is held back, and made once the body has all arrived (or has gone
 * past the cap, or the request failed).
 */
function discardRest(req: BodyStream, received: number, cap: number): void {
  if (received > cap) {
    req.pause();
    return;
  }
  const socket = isClosingSocket(req.socket) ? req.socket : undefined;
  let closeRequested = false;
  const ownDestroySoon = socket !== undefined && Object.hasOwn(socket, 'destroySoon');
  const destroySoon = socket?.destroySoon;
  if (socket !== undefined) {
    socket.destroySoon = () => {
      closeRequested = true;
    };
  }
  let stopped = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    req.off('data', onData);
    req.off('end', stop);
    req.off('error', stop);
    req.off('close', stop);
    if (socket === undefined) return;
    if (ownDestroySoon) socket.destroySoon = destroySoon as () => void;
    else delete (socket as Partial<ClosingSocket>).destroySoon;
    if (closeRequested) socket.destroySoon();
  };
  const onData = (chunk: Buffer | string) => {
    received += typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length;
    if (received > cap) {
      // Past the cap: stop reading; the connection closes (with a reset) once the 413 is written.
      req.pause();
      stop();
    }
  };
  req.on('data', onData);
  req.on('end', stop);
  req.on('error', stop);
  req.on('close', stop);
  req.resume();
}

/** The 413 error of a body over the receiver's limit. */
export function tooLarge(maxBytes: number): PayhookError {
  return new PayhookError(
    'payload_too_large',
    `The body is larger than ${maxBytes} bytes; raise the receiver's maxBodyBytes if events this large are expected.`,
  );
}
