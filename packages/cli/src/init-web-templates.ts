import type { AppTemplate } from './init-app.js';

// `payhook init`'s apps on the Web-standard handler (@payhook/web): the quickstarts of
// docs/web-runtimes.md as whole apps, each receiving on /webhooks with the settings from the
// environment (a Worker's from its env; `wrangler dev` reads them from .dev.vars).

/** The settings check and the receiver, from `env`: what every Web app below starts with. */
const receiverFrom = (env: string, indent = '') =>
  `const { BUSINESS_ID, WEBHOOK_SECRET, ALLOWED_IPS } = ${env};
if (!BUSINESS_ID || !WEBHOOK_SECRET || !ALLOWED_IPS) {
  throw new Error('Set BUSINESS_ID, WEBHOOK_SECRET and ALLOWED_IPS (locally: what payhook serve prints).');
}
const receiver = createReceiver({
  businessIds: [BUSINESS_ID],
  signingSecrets: [WEBHOOK_SECRET],
  // '*': any address, for a platform where none can be trusted locally (next dev); the signature
  // still proves the sender.
  ...(ALLOWED_IPS === '*' ? { allowAnyIp: true } : { allowedIps: ALLOWED_IPS.split(',') }),
});
// Your code goes here: each handler runs once per event (e.g. mark the order
// event.data.metadata.order.identifier paid when its session succeeded).
const log = (event) => console.log(\`\${event.event} \${event.data.id} (\${event.data.status})\`);
receiver.on('payment.session.created', log);
receiver.on('payment.session.succeeded', log);
receiver.on('payment.session.failed', log);`
    .split('\n')
    .map((line) => (line ? indent + line : line))
    .join('\n');

const HEADER = `// A payhook receiver: verifies each event (checksum, signature, sender address), answers 200 at
// once, and runs its handler once, after the response.`;

/** The line the app prints once it listens (and the tests wait for). */
const READY = `console.log(\`Receiving events at http://localhost:\${PORT}/webhooks\`);`;

/** A runtime that serves the handler itself (Bun, Deno): what its index.ts does its own way. */
interface Runtime {
  title: string;
  /** The command that runs index.ts. */
  run: string;
  /** Lines to import before payhook's. */
  imports?: string;
  /** Starts `server` on PORT with the handler, the ready line printed once it listens. */
  serve: string;
  /** The signals to stop on, the runtime's way of hearing them, stopping `server` and exiting. */
  signals: string;
  onSignal: string;
  stop: string;
  exit: string;
}

/** index.ts for a runtime: the receiver served on PORT, stopped cleanly on Ctrl-C or a stop. */
const runtimeApp = (r: Runtime): AppTemplate => ({
  title: r.title,
  dependencies: {},
  scripts: { start: r.run },
  start: `${r.run}   # PORT=3000 by default`,
  localIps: '127.0.0.1,::1',
  files: {
    'index.ts': `${HEADER}
${r.imports ?? ''}import { createReceiver } from '@payhook/core';
import { createWebHandler } from '@payhook/web';

const { PORT = '3000' } = process.env;
${receiverFrom('process.env')}

${r.serve}

for (const signal of ${r.signals}) {
  ${r.onSignal}(signal, async () => {
    await ${r.stop};
    await receiver.close(); // finishes the events already acknowledged
    ${r.exit}(0);
  });
}
`,
  },
});

export const WEB_TEMPLATES = {
  next: {
    title: 'Next.js (App Router)',
    dependencies: { next: '16.4.6', react: '19.3.1', 'react-dom': '19.3.1' },
    scripts: { dev: 'next dev', build: 'next build', start: 'next start' },
    start: 'npm run dev   # or: npm run build && npm start (PORT=3000 by default)',
    localIps: "'*'",
    files: {
      'app/webhooks/route.js': `${HEADER}
import { createReceiver } from '@payhook/core';
import { createWebHandler } from '@payhook/web';
import { after } from 'next/server';

// Made at the first request, not when \`next build\` imports the route (without the variables).
let handler;
function webhookHandler() {
${receiverFrom('process.env', '  ')}
  return createWebHandler(receiver, {
    waitUntil: after, // the 200 goes out, then the handlers run
    // A route handler sees no socket: the address the proxy in front of the app writes (Vercel
    // and most load balancers set x-real-ip). With nothing in front (next dev), ALLOWED_IPS='*'.
    getClientAddress: (request) => request.headers.get('x-real-ip') ?? undefined,
  });
}

export function POST(request) {
  handler ??= webhookHandler();
  return handler(request);
}

export const dynamic = 'force-dynamic';
`,
    },
  },
  hono: {
    title: 'Hono (on Node.js)',
    dependencies: { hono: '^4.13.0', '@hono/node-server': '^2.1.0' },
    scripts: { start: 'node index.mjs' },
    start: 'npm start   # PORT=3000 by default',
    localIps: '127.0.0.1,::1',
    files: {
      'index.mjs': `${HEADER}
import { serve } from '@hono/node-server';
import { createReceiver } from '@payhook/core';
import { createWebHandler } from '@payhook/web';
import { Hono } from 'hono';

const { PORT = '3000' } = process.env;
${receiverFrom('process.env')}

const webhook = createWebHandler(receiver);
const app = new Hono({ strict: false }); // strict: false also routes /webhooks/
// Passing \`c\` hands over the client address (the socket, under @hono/node-server).
app.all('/webhooks', (c) => webhook(c.req.raw, c));
const server = serve({ fetch: app.fetch, port: Number(PORT) }, () => ${READY.slice(0, -1)});

// On Ctrl-C or a stop: refuse new deliveries (the service sends them again) and finish the events
// already acknowledged before exiting.
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, async () => {
    server.close();
    await receiver.close();
  });
}
`,
    },
  },
  bun: runtimeApp({
    title: 'Bun',
    run: 'bun index.ts',
    serve: `// Bun calls fetch(request, server): the handler asks the server for the client address.
const server = Bun.serve({ port: Number(PORT), fetch: createWebHandler(receiver, { path: '/webhooks' }) });
${READY}`,
    signals: "['SIGINT', 'SIGTERM']",
    onSignal: 'process.once',
    stop: 'server.stop()',
    exit: 'process.exit',
  }),
  deno: runtimeApp({
    title: 'Deno',
    run: 'deno run --allow-net --allow-env --allow-read index.ts',
    imports: "import process from 'node:process';\n",
    serve: `// Deno calls the handler with (request, info): the client address is info.remoteAddr.
const server = Deno.serve(
  { port: Number(PORT), onListen: () => ${READY.slice(0, -1)} },
  createWebHandler(receiver, { path: '/webhooks' }),
);`,
    signals: "['SIGINT', 'SIGTERM'] as const",
    onSignal: 'Deno.addSignalListener',
    stop: 'server.shutdown()',
    exit: 'Deno.exit',
  }),
  worker: {
    title: 'Cloudflare Workers',
    dependencies: {},
    devDependencies: { wrangler: '^4.0.0' },
    scripts: { dev: 'wrangler dev', deploy: 'wrangler deploy' },
    start: 'npm run dev   # wrangler dev, on http://localhost:8787; the settings from .dev.vars',
    localIps: '127.0.0.1,::1',
    files: {
      'worker.mjs': `${HEADER}
// No nodejs_compat needed: payhook verifies on its Web path (a JavaScript HMAC, Web Crypto for large bodies).
import { createReceiver } from '@payhook/core';
import { createWebHandler } from '@payhook/web';

// One receiver per isolate, made at its first request: a Worker's settings come with \`env\`.
// Its memory store holds for one isolate only: for exactly once across isolates, give it the
// Durable Object store of payhook's examples/web-worker (store.mjs), as docs/web-runtimes.md shows.
let handler;
function setup(env) {
  if (!handler) {
${receiverFrom('env', '    ')}
    handler = createWebHandler(receiver, { path: '/webhooks' }); // checks CF-Connecting-IP
  }
  return handler;
}

export default {
  // The 200 goes out first; the handlers run under ctx.waitUntil.
  fetch: (request, env, ctx) => setup(env)(request, env, ctx),
};
`,
      'wrangler.toml': `name = "payhook-receiver"
main = "worker.mjs"
compatibility_date = "2026-04-01"
# BUSINESS_ID, WEBHOOK_SECRET and ALLOWED_IPS: locally in .dev.vars (what payhook serve prints);
# deployed, \`wrangler secret put WEBHOOK_SECRET\` and [vars] for the others.
`,
    },
  },
} satisfies Record<string, AppTemplate>;
