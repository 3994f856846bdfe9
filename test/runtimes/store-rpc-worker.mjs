// A Worker that hands the idempotency store contract's operations to the example's Durable Object
// store (examples/web-worker/store.mjs), so that the contract suite, run in Node, exercises the
// store as a Worker uses it: durableObjectStore's calls over RPC to the PayhookStore object, in
// workerd. POST { name, retentionMs, calls: [{ op, args }] } -> { results: [{ result } | { error }] }:
// the calls of one request run at once, as concurrent calls of one isolate do.
import { durableObjectStore } from '../../examples/web-worker/store.mjs';

export { PayhookStore } from '../../examples/web-worker/store.mjs';

export default {
  async fetch(request, env) {
    const { name, retentionMs, calls } = await request.json();
    const store = durableObjectStore(env.PAYHOOK_STORE, { name, retentionMs });
    const results = await Promise.all(
      calls.map(async ({ op, args }) => {
        try {
          return { result: await store[op](...args) };
        } catch (error) {
          return { error: String(error?.stack ?? error) };
        }
      }),
    );
    return Response.json({ results });
  },
};
