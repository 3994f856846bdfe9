import type { Agent, Dispatcher } from 'undici';

/** What an exchange has received so far. */
export interface ResponseState {
  statusCode: number | null;
  location: string | string[] | undefined;
  /** The `Retry-After` header, as received. */
  retryAfter?: string | string[] | undefined;
  /** The first chunks of the body, up to just past the limit. */
  chunks: Buffer[];
  size: number;
}

/** Ends an exchange on purpose: the body passed its limit, or the attempt's deadline came. */
class StopExchange extends Error {}

/**
 * Makes one request through undici's dispatcher and reads the response into `response`: at most
 * `limit` bytes of its body, after which the exchange is aborted so that a huge or endless body
 * costs nothing more (the connection is dropped rather than drained). Resolves with true when the
 * body was read to its end, which leaves the connection in the pool, and false when it stopped at
 * the limit; rejects with the transport's error. `register` receives, at once, the function that
 * stops the exchange at the attempt's deadline: it rejects at once and aborts the request, now if
 * undici has started it or as soon as it does (a request still connecting or queued).
 *
 * The dispatcher rather than `request()`: no response stream to make and read per attempt, and no
 * AbortSignal, which together cost more than the HTTP exchange itself.
 */
export function exchange(
  agent: Agent,
  options: Dispatcher.DispatchOptions,
  response: ResponseState,
  limit: number,
  register: (stop: () => void) => void,
): Promise<boolean> {
  return new Promise((resolve, reject) => {
    let capped = false;
    let settled = false;
    let stopped = false;
    let abort: (() => void) | undefined;
    const settle = (complete: boolean, error?: Error) => {
      if (settled) return;
      settled = true;
      if (error && !(error instanceof StopExchange && capped)) reject(error);
      else resolve(complete);
    };
    register(() => {
      stopped = true;
      abort?.();
      settle(false, new StopExchange('the attempt timed out'));
    });
    agent.dispatch(options, {
      onRequestStart(controller) {
        abort = () => controller.abort(new StopExchange('the attempt timed out'));
        if (stopped) abort();
      },
      onResponseStart(_controller, statusCode, headers) {
        // Informational (1xx) heads come before the real one.
        if (statusCode < 200) return;
        response.statusCode = statusCode;
        response.location = headers.location;
        response.retryAfter = headers['retry-after'];
      },
      onResponseData(controller, chunk) {
        if (capped) return;
        response.chunks.push(chunk);
        response.size += chunk.length;
        if (response.size > limit) {
          capped = true;
          controller.abort(new StopExchange('the response body passed its limit'));
          settle(false);
        }
      },
      onResponseEnd() {
        settle(true);
      },
      onResponseError(_controller, error) {
        settle(false, error);
      },
    });
  });
}

const UTF8_BOM = [0xef, 0xbb, 0xbf];

/** The first `limit` bytes as text; `null` for an empty or absent body. */
export function decodeCapped(chunks: Buffer[], limit: number): string | null {
  if (chunks.length === 0) return null;
  const all = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
  const bytes = all.subarray(0, limit);
  if (bytes.length === 0) return null;
  if (all.length > limit) {
    // stream: true holds back a multi-byte character cut at the limit instead of emitting U+FFFD.
    return new TextDecoder().decode(bytes, { stream: true });
  }
  // A whole body decodes as TextDecoder would (a leading BOM dropped), without making one.
  const bom = UTF8_BOM.every((b, i) => bytes[i] === b);
  return bytes.toString('utf8', bom ? 3 : 0);
}
