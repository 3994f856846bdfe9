import { createReceiver } from '@payhook/core';
import { logEvents, webReceiverOptions } from '@payhook/example-shared/web';
import { createWebHandler } from '@payhook/web';
import { durableObjectStore } from './store.mjs';

export { PayhookStore } from './store.mjs';

// One receiver per isolate, made at its first request (a Worker's settings come with `env`). Its
// memory is the isolate's only: the Durable Object store is what makes a delivery run once across
// isolates. The handler sends the 200 first and runs the event under ctx.waitUntil.
let receiver;
let handler;

function setup(env) {
  if (!receiver) {
    receiver = createReceiver({
      ...webReceiverOptions(env),
      store: durableObjectStore(env.PAYHOOK_STORE),
      // No timers between requests on Workers: the cron trigger below recovers instead.
      recoveryIntervalMs: 0,
    });
    logEvents(receiver, 'worker');
    handler = createWebHandler(receiver, { path: '/webhooks' });
  }
  return { receiver, handler };
}

export default {
  fetch(request, env, ctx) {
    return setup(env).handler(request, env, ctx);
  },
  // wrangler.toml's cron trigger: an event whose isolate was evicted mid-run (its lease lapsed in
  // the store) is claimed and run again here, rather than waiting for a delivery to wake a Worker.
  scheduled(_controller, env, ctx) {
    ctx.waitUntil(setup(env).receiver.recover());
  },
};
