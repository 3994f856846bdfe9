import { Agent, errors, request } from 'undici';

/** What came of forwarding one event to the local receiver. */
export interface ForwardOutcome {
  startedAt: Date;
  latencyMs: number;
  statusCode: number | null;
  /** The first 4 KiB of the answer. */
  responseBody: string | null;
  error: { code: string; message: string } | null;
}

const EXCERPT_BYTES = 4096;

/** Stable codes for what can go wrong on the way to the local receiver. */
function failure(error: unknown, timeoutMs: number): { code: string; message: string } {
  const code = (error as { code?: string }).code;
  if (error instanceof errors.HeadersTimeoutError || error instanceof errors.BodyTimeoutError) {
    return { code: 'timeout', message: `no answer within ${timeoutMs} ms` };
  }
  if (code === 'ECONNREFUSED') return { code: 'connection_refused', message: 'connection refused' };
  if (code === 'ECONNRESET' || error instanceof errors.SocketError) {
    return { code: 'connection_reset', message: 'the connection was closed before an answer' };
  }
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN')
    return { code: 'dns_failed', message: `host not found (${code})` };
  if (typeof code === 'string' && /CERT|SSL|TLS/.test(code)) {
    return { code: 'tls_failed', message: `${code} (use --skip-verify for a self-signed certificate)` };
  }
  return { code: 'request_failed', message: (error as Error).message ?? String(error) };
}

/**
 * Forwards events to one local URL: the exact body and headers the sender gave, over kept-alive
 * connections, with the sender's time-out for an answer.
 *
 * @example
 * ```ts
 * const forwarder = createForwarder('http://localhost:3000/webhooks', { timeoutMs: 15_000 });
 * const outcome = await forwarder.send(body, headers);
 * await forwarder.close();
 * ```
 */
export function createForwarder(url: string, options: { timeoutMs: number; skipVerify?: boolean }) {
  const target = new URL(url);
  const agent = new Agent({
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
    connect: { rejectUnauthorized: !options.skipVerify, timeout: options.timeoutMs },
  });
  return {
    url: target.href,
    async send(body: string, headers: Readonly<Record<string, string>>): Promise<ForwardOutcome> {
      const startedAt = new Date();
      const t0 = performance.now();
      try {
        const response = await request(target, {
          method: 'POST',
          headers: { ...headers, host: target.host },
          body,
          dispatcher: agent,
        });
        let excerpt = '';
        let size = 0;
        for await (const chunk of response.body) {
          if (size < EXCERPT_BYTES)
            excerpt += (chunk as Buffer).subarray(0, EXCERPT_BYTES - size).toString('utf8');
          size += (chunk as Buffer).length;
        }
        return {
          startedAt,
          latencyMs: performance.now() - t0,
          statusCode: response.statusCode,
          responseBody: excerpt,
          error: null,
        };
      } catch (error) {
        return {
          startedAt,
          latencyMs: performance.now() - t0,
          statusCode: null,
          responseBody: null,
          error: failure(error, options.timeoutMs),
        };
      }
    },
    close: () => agent.close(),
  };
}
