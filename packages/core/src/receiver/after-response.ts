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
  if (res.writableFinished || res.destroyed) {
    setImmediate(start);
    return;
  }
  // One listener for both events (not two `once` wrappers), which acts on the first and stays:
  // the response is over by then, and taking listeners off again cost more than they ever will.
  let started = false;
  const done = () => {
    if (started) return;
    started = true;
    start();
  };
  res.on('finish', done);
  res.on('close', done);
}
