// Runs the Worker locally on workerd, as `wrangler dev` does: bundled with esbuild for the
// browser platform (no Node built-ins, no nodejs_compat) and served by Miniflare with its Durable
// Object. Settings from the environment: BUSINESS_ID, ALLOWED_IPS, WEBHOOK_SECRET, WEBHOOK_PUBLIC_KEY,
// ALLOW_UNSIGNED, HOST and PORT; PERSIST_DIR keeps the Durable Object's storage in a directory
// across runs (without it, in memory).
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { Miniflare } from 'miniflare';

/** The Worker as one ES module: what `wrangler deploy` uploads, give or take minification. */
export async function bundleWorker(entry = fileURLToPath(new URL('./worker.mjs', import.meta.url))) {
  const { outputFiles } = await build({
    entryPoints: [entry],
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'browser',
    conditions: ['workerd', 'worker', 'browser'],
    external: ['cloudflare:*'],
    logLevel: 'silent',
    // The packages as published (their dist), whatever a tsconfig around the checkout maps them to.
    tsconfigRaw: {},
  });
  return outputFiles[0].text;
}

/** Serves `script` on workerd with the PayhookStore Durable Object bound as PAYHOOK_STORE. */
export function serveWorker(script, { bindings = {}, host = '127.0.0.1', port = 0, persist } = {}) {
  return new Miniflare({
    ...(persist ? { durableObjectsPersist: persist } : {}),
    modules: true,
    script,
    compatibilityDate: '2026-04-01',
    durableObjects: { PAYHOOK_STORE: 'PayhookStore' },
    bindings,
    host,
    port,
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const names = ['BUSINESS_ID', 'ALLOWED_IPS', 'WEBHOOK_SECRET', 'WEBHOOK_PUBLIC_KEY', 'ALLOW_UNSIGNED'];
  const bindings = Object.fromEntries(names.filter((n) => process.env[n]).map((n) => [n, process.env[n]]));
  const mf = serveWorker(await bundleWorker(), {
    bindings,
    host: process.env.HOST ?? '127.0.0.1',
    port: Number(process.env.PORT ?? 8787),
    persist: process.env.PERSIST_DIR,
  });
  const url = await mf.ready;
  console.log(`worker receiver on ${url}webhooks`);
  const stop = async () => {
    await mf.dispose();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
