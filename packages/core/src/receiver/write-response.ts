import type { ServerResponse } from 'node:http';
import { runAfterResponse } from './after-response.js';
import type { ReceiverResult } from './types.js';

/**
 * Writes a receiver's answer to a Node response (status, headers, JSON body), then starts the
 * accepted event's work once the response is out ({@link runAfterResponse}). For adapters whose
 * framework lets them write the Node response directly; one that has its own response object
 * (Koa's `ctx.body`, Fastify's `reply.send`) writes through it so its hooks still run, and calls
 * `runAfterResponse` itself.
 *
 * @example
 * ```ts
 * receiver.handle(request).then((result) => writeResponse(res, result));
 * ```
 */
export function writeResponse(res: ServerResponse, result: ReceiverResult): void {
  // Written directly rather than through a framework's JSON helper: an acknowledgement needs
  // none of Express's content negotiation or ETag (a SHA-1 of every response).
  res.statusCode = result.status;
  const { headers } = result;
  for (const name in headers) res.setHeader(name, headers[name] as string);
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.end(JSON.stringify(result.body));
  if (result.afterResponse) runAfterResponse(res, result.afterResponse);
}
