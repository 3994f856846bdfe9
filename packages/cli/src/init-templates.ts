/** The frameworks `payhook init` writes a receiver for. */
export const FRAMEWORKS = ['express', 'koa', 'fastify'] as const;
export type Framework = (typeof FRAMEWORKS)[number];

interface FrameworkTemplate {
  title: string;
  /** The framework's own range in the app's package.json (one its adapter takes). */
  range: string;
  imports: string;
  /** Mounts the receiver on /webhooks and listens on PORT; defines `port` and `stop`. */
  serve: string;
}

const TEMPLATES: Record<Framework, FrameworkTemplate> = {
  express: {
    title: 'Express',
    range: '^5.1.0',
    imports: `import express from 'express';\nimport { payhook } from '@payhook/express';`,
    serve: `const app = express();
app.use('/webhooks', payhook(receiver)); // before express.json(): the raw body is verified
const server = app.listen(Number(PORT));
await new Promise((resolve) => server.once('listening', resolve));
const port = server.address().port;
const stop = () => new Promise((resolve) => server.close(resolve));`,
  },
  koa: {
    title: 'Koa',
    range: '^3.0.0',
    imports: `import Koa from 'koa';\nimport { payhook } from '@payhook/koa';`,
    serve: `const app = new Koa();
app.use(payhook(receiver, { path: '/webhooks' })); // with or without a body parser after it
const server = app.listen(Number(PORT));
await new Promise((resolve) => server.once('listening', resolve));
const port = server.address().port;
const stop = () => new Promise((resolve) => server.close(resolve));`,
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
};

/** index.mjs: the README's quickstart for `framework`, settings from the environment, runnable as is. */
export function indexSource(framework: Framework): string {
  const t = TEMPLATES[framework];
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

/** package.json: the adapter and core (from `payhookRange`), and the framework. */
export function packageJsonSource(
  name: string,
  framework: Framework,
  payhookRange: (pkg: string) => string,
): string {
  const manifest = {
    name,
    private: true,
    type: 'module',
    engines: { node: '>=20.19' },
    scripts: { start: 'node index.mjs' },
    dependencies: {
      '@payhook/core': payhookRange('@payhook/core'),
      [`@payhook/${framework}`]: payhookRange(`@payhook/${framework}`),
      [framework]: TEMPLATES[framework].range,
    },
  };
  return `${JSON.stringify(manifest, null, 2)}\n`;
}

/** README.md: how to run the app and send it events; `fromClone` says where @payhook/* come from. */
export function readmeSource(name: string, framework: Framework, fromClone: string | undefined): string {
  const origin = fromClone
    ? `
The @payhook packages are the tarballs of a payhook clone (\`file:\` paths in package.json, to
${fromClone}). After pulling a newer payhook, run \`pnpm pack:all\` in the clone, then \`npm install\`
with those two paths here again (a bare \`npm install\` keeps the copies it installed before).
`
    : '';
  return `# ${name}

A payhook receiver on ${TEMPLATES[framework].title}: \`index.mjs\` verifies each event the service
sends to \`/webhooks\`, answers 200 at once, and runs its handler once.

## Run it

\`\`\`sh
npm install
# locally, what \`payhook serve\` prints; in production, your business id, its signing secret and
# the service's addresses
export BUSINESS_ID=... WEBHOOK_SECRET=whsec_... ALLOWED_IPS=127.0.0.1,::1
npm start   # PORT=3000 by default
\`\`\`

## Send it events

\`payhook\` is \`pnpm -s payhook\` in the payhook clone, or \`npx payhook\` where it is installed.

\`\`\`sh
# one signed event, straight to the receiver
payhook trigger payment.session.succeeded --to http://localhost:3000/webhooks \\
  --business-id "$BUSINESS_ID" --secret "$WEBHOOK_SECRET"
# or real events from the local sender: register the URL, then make a payment succeed
payhook serve --allow-private-webhooks --business-id "$BUSINESS_ID"
payhook endpoints add http://localhost:3000/webhooks --api-key sk_test_...
payhook trigger payment.session.succeeded --base-url http://127.0.0.1:8080 --api-key sk_test_...
\`\`\`
${origin}`;
}
