import type { ServerResponse } from 'node:http';

/**
 * Runs `start` once the response has been handed to the socket (`finish`), or the client went
 * away (`close`): the event was recorded, so its work starts either way. Adapters call it with
 * the Node response under their framework's.
 *
 * @example
 * ```ts
 * const result = await receiver.handle(request);
 * res.status(result.status).json(result.body);
 * if (result.afterResponse) runAfterResponse(res, result.afterResponse);
 * ```
 */
export function runAfterResponse(res: ServerResponse, start: () => void): void {
  let started = false;
  const once = () => {
    if (started) return;
    started = true;
    res.off('finish', once);
    res.off('close', once);
    start();
  };
  if (res.writableFinished || res.destroyed) {
    setImmediate(once);
    return;
  }
  res.once('finish', once);
  res.once('close', once);
}
