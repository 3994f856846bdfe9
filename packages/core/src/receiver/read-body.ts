import type { Readable } from 'node:stream';
import { PayhookError } from '../errors.js';

/** The parts of a Node request that {@link readRawBody} reads. */
export type BodyStream = Pick<Readable, 'on' | 'off' | 'pause' | 'resume'> & {
  headers: Record<string, string | string[] | undefined>;
};

/**
 * Reads a request body into one Buffer, refusing it with `payload_too_large` (413) as soon as it
 * passes `maxBytes`: a `Content-Length` above the limit is refused before a byte is read, and a
 * chunked body at the first chunk past the limit. The rest is never read; the stream is paused,
 * not destroyed, so the 413 can still be written (answer it with `Connection: close`).
 *
 * @example
 * ```ts
 * const rawBody = await readRawBody(req, 1024 * 1024);
 * ```
 */
export function readRawBody(req: BodyStream, maxBytes: number): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (typeof declared === 'string' && Number(declared) > maxBytes) {
    req.pause();
    return Promise.reject(tooLarge(maxBytes));
  }
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    const onData = (chunk: Buffer | string) => {
      const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      total += buf.length;
      if (total > maxBytes) {
        // Nothing more is counted: the stream is paused, and resumed later it finds no listener.
        req.off('data', onData);
        req.pause();
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

/** The 413 error of a body over the receiver's limit. */
export function tooLarge(maxBytes: number): PayhookError {
  return new PayhookError(
    'payload_too_large',
    `The body is larger than ${maxBytes} bytes; raise the receiver's maxBodyBytes if events this large are expected.`,
  );
}
