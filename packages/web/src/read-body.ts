import { PayhookError } from '@payhook/core';

/**
 * The 413 of a body over the receiver's limit: the code and message core answers with when a
 * Node adapter reads the body.
 */
export function tooLarge(maxBytes: number): PayhookError {
  return new PayhookError(
    'payload_too_large',
    `The body is larger than ${maxBytes} bytes; raise the receiver's maxBodyBytes if events this large are expected.`,
  );
}

/**
 * The error of a request whose body something else read first: a bug in the app, not the
 * client's fault, so it is answered 500 `internal_error` (the sender retries) and logged with
 * this message.
 */
export function bodyAlreadyRead(): Error {
  return new Error(
    'payhook: the request body was already read before createWebHandler got the request; pass the request before anything reads its body (request.json(), request.text(), a body parser), and in Hono pass c.req.raw before any c.req.json()',
  );
}

type Reader = ReadableStreamDefaultReader<Uint8Array>;

/** A Node socket as Node's HTTP server closes it after a `Connection: close` response. */
interface ClosingSocket {
  destroySoon: () => void;
}

const isClosingSocket = (socket: unknown): socket is ClosingSocket =>
  typeof socket === 'object' &&
  socket !== null &&
  typeof (socket as { destroySoon?: unknown }).destroySoon === 'function';

/**
 * Holds back Node's close of `socket` after the 413 (`Connection: close`) until `release` is
 * called: Node destroys the socket once the response is flushed, and with body bytes still
 * unread the kernel answers a client still writing with a reset, which loses the 413. Only
 * under a Node server (`@hono/node-server` passes the socket); elsewhere the platform decides.
 */
function holdClose(socket: unknown): () => void {
  if (!isClosingSocket(socket)) return () => {};
  let closeRequested = false;
  const own = Object.hasOwn(socket, 'destroySoon');
  const destroySoon = socket.destroySoon;
  socket.destroySoon = () => {
    closeRequested = true;
  };
  return () => {
    if (own) socket.destroySoon = destroySoon;
    else delete (socket as Partial<ClosingSocket>).destroySoon;
    if (closeRequested) socket.destroySoon();
  };
}

/**
 * Reads and throws away the rest of a refused body, `received` bytes of which have arrived, while
 * the whole stays within `cap`; past it the stream is cancelled. A client that writes its whole
 * body before it reads the answer then reads the 413 rather than a reset where the server keeps
 * the connection until the body has arrived. Runs after the refusal is answered; never rejects.
 */
async function discardRest(reader: Reader, received: number, cap: number, socket: unknown): Promise<void> {
  const release = holdClose(socket);
  try {
    while (received <= cap) {
      const { done, value } = await reader.read();
      if (done) return;
      received += value.byteLength;
    }
    await reader.cancel();
  } catch {
    // The client went away, or the platform closed the stream: nothing is left to drain.
  } finally {
    release();
  }
}

/**
 * Reads a Web request's body once, from its stream, into one `Uint8Array`: a `Content-Length`
 * over `maxBytes` is refused before a byte is read, and a streamed body at the first chunk that
 * passes the limit, without buffering the rest (413 `payload_too_large`). The rest of a refused
 * body is drained in the background up to `maxDrainBytes` in all (0: cancelled at once).
 * `socket`, a Node socket under the request (`@hono/node-server`'s), is kept open meanwhile.
 * Rejects with an Error when the body was already read (a bug of the app), and with 400
 * `malformed_payload` when the stream fails.
 */
export async function readWebBody(
  request: Request,
  maxBytes: number,
  maxDrainBytes: number,
  socket?: unknown,
): Promise<Uint8Array> {
  if (request.bodyUsed) throw bodyAlreadyRead();
  const stream = request.body;
  if (stream === null) return new Uint8Array(0);
  const declared = request.headers.get('content-length');
  if (declared !== null && Number(declared) > maxBytes) {
    const reader = stream.getReader();
    if (Number(declared) > maxDrainBytes) reader.cancel().catch(() => {});
    else void discardRest(reader, 0, maxDrainBytes, socket);
    throw tooLarge(maxBytes);
  }
  let reader: Reader;
  try {
    reader = stream.getReader();
  } catch (error) {
    // Locked: something else holds a reader on the body.
    throw Object.assign(bodyAlreadyRead(), { cause: error });
  }
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    let next: Awaited<ReturnType<Reader['read']>>;
    try {
      next = await reader.read();
    } catch (error) {
      throw new PayhookError('malformed_payload', 'The request body could not be read.', { cause: error });
    }
    if (next.done) break;
    const chunk = next.value;
    total += chunk.byteLength;
    if (total > maxBytes) {
      void discardRest(reader, total, maxDrainBytes, socket);
      throw tooLarge(maxBytes);
    }
    chunks.push(chunk);
  }
  if (chunks.length === 1) return chunks[0] as Uint8Array;
  const body = new Uint8Array(total);
  let at = 0;
  for (const chunk of chunks) {
    body.set(chunk, at);
    at += chunk.byteLength;
  }
  return body;
}
