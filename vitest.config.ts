import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { configDefaults, defineConfig } from 'vitest/config';
import { TEST_TAGS, unitExcludedFiles } from './test/support/test-tags.js';

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
  { find: /^@payhook\/web$/, replacement: src('web') },
  { find: /^@payhook\/redis$/, replacement: src('redis') },
  { find: /^@payhook\/postgres$/, replacement: src('postgres') },
  { find: /^@payhook\/sender$/, replacement: src('sender') },
];

const root = (dir: string) => fileURLToPath(new URL(dir, import.meta.url));

// The sender seals signing secrets with PAYHOOK_SECRET_KEY and refuses PostgreSQL without one:
// the tests' key, fixed so that every worker and the processes they spawn open each other's
// values. A test of a missing or wrong key sets its own.
const env = { PAYHOOK_SECRET_KEY: 'ktest:JCaga5QzmwPjolfGU_ErHLa5cS0phAowj-W7vOn7Fqk' };

// `pnpm test:unit` is `vitest run --mode unit`: the files that declare no tag (see
// test/support/test-tags.ts), in every project, and the sender's files chosen to run on PGlite
// alone (UNIT_PGLITE_FILES there), with child processes and the services' URLs refused, so that a
// file that needs them fails there instead of passing by luck.
const unitOnly = (mode: string, dir: string) =>
  mode === 'unit'
    ? {
        exclude: [...configDefaults.exclude, ...unitExcludedFiles(root(dir))],
        setupFiles: [root('./test/support/unit-guard.ts')],
      }
    : {};

// Hooks stop what the tests started: a sender's graceful stop waits out deliveries in flight (10 s
// by default) and then closes its database, which on two loaded cores outlasts vitest's 10 s.
const HOOK_TIMEOUT_MS = 30_000;

const pkg = (mode: string, name: string, extra: Record<string, unknown> = {}) => ({
  resolve: { alias },
  test: {
    name,
    root: `./packages/${name}`,
    include: ['test/**/*.test.ts'],
    env,
    hookTimeout: HOOK_TIMEOUT_MS,
    typecheck: { enabled: true, include: ['test/**/*.test-d.ts'], tsconfig: '../../tsconfig.json' },
    ...unitOnly(mode, `./packages/${name}/`),
    ...extra,
  },
});

export default defineConfig(({ mode }) => ({
  test: {
    reporters: ['default', './test/support/summary-reporter.ts'],
    tags: [...TEST_TAGS],
    // Every core (vitest leaves one to itself by default, so one file at a time on two cores): most
    // files wait on processes, sockets and databases, and two at once halve the run on two cores.
    maxWorkers: availableParallelism(),
    projects: [
      pkg(mode, 'core'),
      pkg(mode, 'express'),
      pkg(mode, 'koa'),
      pkg(mode, 'fastify'),
      pkg(mode, 'web'),
      // Real processes, a fault proxy and timing against the shared Redis: one file at a time.
      pkg(mode, 'redis', { fileParallelism: false }),
      // Receiver processes killed mid-transaction and a scratch cluster's faults: one file at a time.
      pkg(mode, 'postgres', { fileParallelism: false }),
      pkg(mode, 'sender'),
      // The built `payhook` command, spawned as a user runs it.
      pkg(mode, 'cli'),
      // Cross-package tests: examples and, later, sender -> receivers end to end.
      {
        resolve: { alias },
        test: {
          name: 'e2e',
          root: '.',
          include: ['test/**/*.test.ts'],
          env,
          testTimeout: 30_000,
          hookTimeout: HOOK_TIMEOUT_MS,
          ...unitOnly(mode, './'),
        },
      },
    ],
  },
}));
