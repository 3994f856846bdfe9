import type { AppTemplate } from './init-app.js';
import { WEB_TEMPLATES } from './init-web-templates.js';

export type { AppTemplate } from './init-app.js';

/** The Node.js frameworks, each with its adapter: what their index.mjs mounts and how. */
interface NodeFramework {
  title: string;
  /** The framework's own range in the app's package.json (one its adapter takes). */
  range: string;
  imports: string;
  /** Mounts the receiver on /webhooks and listens on PORT; defines `port` and `stop`. */
  serve: string;
}

/** How an app whose `listen` returns a Node.js server (Express, Koa) starts and stops it. */
const LISTEN_NODE_SERVER = `const server = app.listen(Number(PORT));
await new Promise((resolve) => server.once('listening', resolve));
const port = server.address().port;
const stop = () => new Promise((resolve) => server.close(resolve));`;

const NODE_FRAMEWORKS = {
  express: {
    title: 'Express',
    range: '^5.1.0',
    imports: `import express from 'express';\nimport { payhook } from '@payhook/express';`,
    serve: `const app = express();
app.use('/webhooks', payhook(receiver)); // before express.json(): the raw body is verified
${LISTEN_NODE_SERVER}`,
  },
  koa: {
    title: 'Koa',
    range: '^3.0.0',
    imports: `import Koa from 'koa';\nimport { payhook } from '@payhook/koa';`,
    serve: `const app = new Koa();
app.use(payhook(receiver, { path: '/webhooks' })); // with or without a body parser after it
${LISTEN_NODE_SERVER}`,
  },
  fastify: {
    title: 'Fastify',
    range: '^5.3.0',
    imports: `import Fastify from 'fastify';\nimport payhook from '@payhook/fastify';`,
    serve: `const app = Fastify();
await app.register(payhook, { receiver, path: '/webhooks' }); // other routes keep Fastify's parsers
await app.listen({ port: Number(PORT) });
const port = app.server.address().port;
const stop = () => app.close();`,
  },
} satisfies Record<string, NodeFramework>;

/** index.mjs: the quickstart for a Node.js framework, settings from the environment, runnable as is. */
function nodeIndex(t: NodeFramework): string {
  return `// A payhook receiver: verifies each event (checksum, signature, sender address), answers 200 at
// once, and runs its handler once, after the response.
import { createReceiver } from '@payhook/core';
${t.imports}

// Locally, the values \`payhook serve\` prints (ALLOWED_IPS=127.0.0.1,::1, the loopback addresses
// it delivers from); in production, your business id, its signing secret and the service's addresses.
const { BUSINESS_ID, WEBHOOK_SECRET, ALLOWED_IPS, PORT = '3000' } = process.env;
if (!BUSINESS_ID || !WEBHOOK_SECRET || !ALLOWED_IPS) {
  console.error('Set BUSINESS_ID, WEBHOOK_SECRET and ALLOWED_IPS (locally: what payhook serve prints).');
  process.exit(1);
}
const receiver = createReceiver({
  businessIds: [BUSINESS_ID],
  signingSecrets: [WEBHOOK_SECRET],
  allowedIps: ALLOWED_IPS.split(','),
});

// Your code goes here: each handler runs once per event (e.g. mark the order
// event.data.metadata.order.identifier paid when its session succeeded).
const log = (event) => console.log(\`\${event.event} \${event.data.id} (\${event.data.status})\`);
receiver.on('payment.session.created', log);
receiver.on('payment.session.succeeded', log);
receiver.on('payment.session.failed', log);

${t.serve}
console.log(\`Receiving events at http://localhost:\${port}/webhooks\`);

// On Ctrl-C or a stop: refuse new deliveries (the service sends them again) and finish the events
// already acknowledged before exiting.
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, async () => {
    await Promise.all([stop(), receiver.close()]);
  });
}
`;
}

/** Every framework and runtime `payhook init` writes an app for, by its --framework name. */
export const TEMPLATES: Record<string, AppTemplate> = {
  ...Object.fromEntries(
    Object.entries(NODE_FRAMEWORKS).map(([name, t]): [string, AppTemplate] => [
      name,
      {
        title: t.title,
        dependencies: { [name]: t.range },
        scripts: { start: 'node index.mjs' },
        start: 'npm start   # PORT=3000 by default',
        localIps: '127.0.0.1,::1',
        files: { 'index.mjs': nodeIndex(t) },
      },
    ]),
  ),
  ...WEB_TEMPLATES,
};

/** The frameworks `payhook init` writes a receiver for. */
export const FRAMEWORKS = ['express', 'koa', 'fastify', 'next', 'hono', 'bun', 'deno', 'worker'] as const;
export type Framework = (typeof FRAMEWORKS)[number];

/** The @payhook package a framework's app mounts: its adapter, or the Web handler. */
export const adapterOf = (framework: Framework): string =>
  framework in NODE_FRAMEWORKS ? `@payhook/${framework}` : '@payhook/web';

/** package.json: core and the adapter (from `payhookRange`), and the framework's packages. */
export function packageJsonSource(
  name: string,
  framework: Framework,
  payhookRange: (pkg: string) => string,
): string {
  const t = TEMPLATES[framework] as AppTemplate;
  const manifest = {
    name,
    private: true,
    type: 'module',
    engines: { node: '>=20.19' },
    scripts: t.scripts,
    dependencies: {
      '@payhook/core': payhookRange('@payhook/core'),
      [adapterOf(framework)]: payhookRange(adapterOf(framework)),
      ...t.dependencies,
    },
    ...(t.devDependencies ? { devDependencies: t.devDependencies } : {}),
  };
  return `${JSON.stringify(manifest, null, 2)}\n`;
}

/** Where a template's app listens locally: `wrangler dev`'s port for a Worker, else PORT's default. */
export const localUrl = (framework: Framework) =>
  `http://localhost:${framework === 'worker' ? 8787 : 3000}/webhooks`;

/** How a template's app takes its settings locally: export lines, or .dev.vars for a Worker. */
function settingsLines(framework: Framework): string {
  const ips = (TEMPLATES[framework] as AppTemplate).localIps;
  if (framework === 'worker') {
    return `# .dev.vars, which wrangler dev reads: locally, what \`payhook serve\` prints
BUSINESS_ID=...
WEBHOOK_SECRET=whsec_...
ALLOWED_IPS=${ips}`;
  }
  const why =
    ips === "'*'"
      ? `
# ALLOWED_IPS='*' locally: next dev (or next start with no proxy in front) sees no client
# address it can trust; the signature still proves the sender. Behind Vercel or a load balancer
# that writes x-real-ip, the service's addresses.`
      : '';
  return `# locally, what \`payhook serve\` prints; in production, your business id, its signing secret and
# the service's addresses${why}
export BUSINESS_ID=... WEBHOOK_SECRET=whsec_... ALLOWED_IPS=${ips}`;
}

/** README.md: how to run the app and send it events; `fromClone` says where @payhook/* come from. */
export function readmeSource(name: string, framework: Framework, fromClone: string | undefined): string {
  const t = TEMPLATES[framework] as AppTemplate;
  const origin = fromClone
    ? `
The @payhook packages are the tarballs of a payhook clone (\`file:\` paths in package.json, to
${fromClone}). After pulling a newer payhook, run \`pnpm pack:all\` in the clone, then \`npm install\`
with those two paths here again (a bare \`npm install\` keeps the copies it installed before).
`
    : '';
  const url = localUrl(framework);
  const files = Object.keys(t.files).filter((f) => !f.endsWith('.toml'));
  return `# ${name}

A payhook receiver on ${t.title}: \`${files.join('`, `')}\` verifies each event the service
sends to \`/webhooks\`, answers 200 at once, and runs its handler once.

## Run it

\`\`\`sh
npm install
${settingsLines(framework)}
${t.start}
\`\`\`

## Send it events

\`payhook\` is \`pnpm -s payhook\` in the payhook clone, or \`npx payhook\` where it is installed.

\`\`\`sh
# one signed event, straight to the receiver
payhook trigger payment.session.succeeded --to ${url} \\
  --business-id "$BUSINESS_ID" --secret "$WEBHOOK_SECRET"
# or real events from the local sender: register the URL, then make a payment succeed
payhook serve --allow-private-webhooks --business-id "$BUSINESS_ID"
payhook endpoints add ${url} --api-key sk_test_...
payhook trigger payment.session.succeeded --base-url http://127.0.0.1:8080 --api-key sk_test_...
\`\`\`
${origin}`;
}
