// A Worker that hands the idempotency store contract's operations to the example's Durable Object
// store (examples/web-worker/store.mjs), so that the contract suite, run in Node, exercises the
// store as a Worker uses it: durableObjectStore's calls over RPC to the PayhookStore object, in
// workerd. POST { name, retentionMs, op, args } -> { result }.
import { durableObjectStore } from '../../examples/web-worker/store.mjs';

export { PayhookStore } from '../../examples/web-worker/store.mjs';

export default {
  async fetch(request, env) {
    const { name, retentionMs, op, args } = await request.json();
    const store = durableObjectStore(env.PAYHOOK_STORE, { name, retentionMs });
    try {
      return Response.json({ result: await store[op](...args) });
    } catch (error) {
      return Response.json({ error: String(error?.stack ?? error) }, { status: 500 });
    }
  },
};
