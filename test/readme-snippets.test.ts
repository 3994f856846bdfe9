// @module-tag process
// @module-tag build
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { readSnippets, SNIPPET_CONTEXT } from './support/readme-snippets.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const at = (path: string) => join(root, path);

// What a merchant's compiler sees: each package's built declarations, and the frameworks' own types.
const PATHS: Record<string, string> = {
  '@payhook/core': 'packages/core/dist/index.d.ts',
  '@payhook/core/testing': 'packages/core/dist/testing.d.ts',
  '@payhook/express': 'packages/express/dist/index.d.ts',
  '@payhook/koa': 'packages/koa/dist/index.d.ts',
  '@payhook/fastify': 'packages/fastify/dist/index.d.ts',
  '@payhook/redis': 'packages/redis/dist/index.d.ts',
  '@payhook/postgres': 'packages/postgres/dist/index.d.ts',
  '@payhook/sender': 'packages/sender/dist/index.d.ts',
  '@payhook/web': 'packages/web/dist/index.d.ts',
  express: 'packages/express/node_modules/@types/express/index.d.ts',
  koa: 'packages/koa/node_modules/@types/koa/index.d.ts',
  fastify: 'packages/fastify/node_modules/fastify/fastify.d.ts',
  ioredis: 'node_modules/ioredis/built/index.d.ts',
  // The PostgreSQL store's driver and the query builders its README shows (its dev dependencies).
  pg: 'packages/postgres/node_modules/@types/pg/index.d.ts',
  kysely: 'packages/postgres/node_modules/kysely/dist/esm/index.d.ts',
  'drizzle-orm': 'packages/postgres/node_modules/drizzle-orm/index.d.ts',
  'drizzle-orm/node-postgres': 'packages/postgres/node_modules/drizzle-orm/node-postgres/index.d.ts',
  'drizzle-orm/pg-core': 'packages/postgres/node_modules/drizzle-orm/pg-core/index.d.ts',
  vitest: 'node_modules/vitest/dist/index.d.ts',
  // The Web-standard quickstarts: Next.js, Hono and the Workers runtime's module (a few types).
  'next/server': 'node_modules/next/server.d.ts',
  hono: 'node_modules/hono/dist/types/index.d.ts',
  '@hono/node-server': 'node_modules/@hono/node-server/dist/index.d.mts',
  'cloudflare:workers': 'test/support/cloudflare-workers.d.ts',
  'prom-client': 'examples/prometheus-metrics/node_modules/prom-client/index.d.ts',
  // The tracing example registers an SDK: the sender's own (dev) dependencies.
  '@opentelemetry/api': 'packages/sender/node_modules/@opentelemetry/api/build/src/index.d.ts',
  '@opentelemetry/core': 'packages/sender/node_modules/@opentelemetry/core/build/src/index.d.ts',
  '@opentelemetry/sdk-trace-base':
    'packages/sender/node_modules/@opentelemetry/sdk-trace-base/build/src/index-shim.d.ts',
};

describe('README snippets', () => {
  it('every TypeScript and JavaScript block compiles under tsc --strict against the built packages', async () => {
    for (const [name, path] of Object.entries(PATHS)) {
      if (!existsSync(at(path))) throw new Error(`${path} is missing (for ${name}): run pnpm build first.`);
    }
    const snippets = readSnippets(root);
    expect(snippets.length).toBeGreaterThan(15);
    const base = await mkdtemp(join(tmpdir(), 'payhook-snippets-'));
    const dir = join(base, 'snippets');
    try {
      await mkdir(dir);
      await mkdir(join(base, 'src'));
      for (const snippet of snippets)
        await writeFile(join(dir, snippet.name), `${snippet.code}\nexport {};\n`);
      await writeFile(join(dir, 'context.d.mts'), SNIPPET_CONTEXT);
      // The test-store example imports its own store from ../src/index.js.
      await writeFile(
        join(base, 'src', 'index.ts'),
        `import type { IdempotencyStore } from '@payhook/core';\nexport declare function createMyStore(options: { prefix: string; retentionMs: number }): IdempotencyStore;\n`,
      );
      // The Worker quickstart imports its Durable Object store from ./store.js.
      await writeFile(
        join(dir, 'store.d.ts'),
        `import type { IdempotencyStore } from '@payhook/core';\nexport declare class PayhookStore {}\nexport declare function durableObjectStore(namespace: DurableObjectNamespace, options?: { name?: string; retentionMs?: number }): IdempotencyStore;\n`,
      );
      await writeFile(
        join(dir, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            strict: true,
            noEmit: true,
            skipLibCheck: true,
            target: 'es2022',
            module: 'nodenext',
            moduleResolution: 'nodenext',
            types: ['node'],
            typeRoots: [at('node_modules/@types')],
            paths: Object.fromEntries(Object.entries(PATHS).map(([name, path]) => [name, [at(path)]])),
          },
          files: [...snippets.map((s) => s.name), 'context.d.mts'],
        }),
      );
      const tsc = at('node_modules/typescript/bin/tsc');
      const output = await promisify(execFile)(process.execPath, [
        tsc,
        '-p',
        join(dir, 'tsconfig.json'),
      ]).then(
        () => '',
        (error: { stdout?: string }) => error.stdout ?? String(error),
      );
      // Each error, at its README and line.
      const errors = output
        .split('\n')
        .filter((line) => line.includes('error TS'))
        .map((line) => {
          const match = /([\w-]+\.[mc]ts)\((\d+),(\d+)\): (.*)$/.exec(line);
          const snippet = match && snippets.find((s) => s.name === match[1]);
          return snippet && match
            ? `${snippet.readme}:${snippet.line + Number(match[2]) - 1}: ${match[4]}`
            : line;
        });
      expect(errors, errors.join('\n')).toEqual([]);
    } finally {
      await rm(base, { recursive: true, force: true });
    }
  }, 120_000);
});
