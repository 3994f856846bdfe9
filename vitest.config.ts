import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const src = (pkg: string, entry = 'index.ts') =>
  fileURLToPath(new URL(`./packages/${pkg}/src/${entry}`, import.meta.url));

// Tests import the packages by name; in the test run the names resolve to the sources, so a test
// never runs against a stale build. The CommonJS test loads the built files on purpose.
const alias = [
  { find: /^@payhook\/core\/testing$/, replacement: src('core', 'testing/index.ts') },
  { find: /^@payhook\/core$/, replacement: src('core') },
  { find: /^@payhook\/express$/, replacement: src('express') },
  { find: /^@payhook\/koa$/, replacement: src('koa') },
  { find: /^@payhook\/fastify$/, replacement: src('fastify') },
  { find: /^@payhook\/redis$/, replacement: src('redis') },
  { find: /^@payhook\/sender$/, replacement: src('sender') },
];

const pkg = (name: string, extra: Record<string, unknown> = {}) => ({
  resolve: { alias },
  test: {
    name,
    root: `./packages/${name}`,
    include: ['test/**/*.test.ts'],
    typecheck: { enabled: true, include: ['test/**/*.test-d.ts'], tsconfig: '../../tsconfig.json' },
    ...extra,
  },
});

export default defineConfig({
  test: {
    reporters: ['default', './test/support/summary-reporter.ts'],
    projects: [
      pkg('core'),
      pkg('express'),
      pkg('koa'),
      pkg('fastify'),
      // Real processes, a fault proxy and timing against the shared Redis: one file at a time.
      pkg('redis', { fileParallelism: false }),
      pkg('sender'),
      // The built `payhook` command, spawned as a user runs it.
      pkg('cli'),
      // Cross-package tests: examples and, later, sender -> receivers end to end.
      {
        resolve: { alias },
        test: { name: 'e2e', root: '.', include: ['test/**/*.test.ts'], testTimeout: 30_000 },
      },
    ],
  },
});
