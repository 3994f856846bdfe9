import { createReceiver } from '@payhook/core';
import { logEvents, webReceiverOptions } from '@payhook/example-shared/web';

// One receiver per server process, made at the first request rather than at import: `next build`
// imports route modules, and the settings are the running server's.
let receiver;

export function getReceiver() {
  if (!receiver) {
    receiver = createReceiver(webReceiverOptions(process.env));
    logEvents(receiver, 'nextjs');
  }
  return receiver;
}
