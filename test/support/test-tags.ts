import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * What a test file needs beyond its own process, declared at its top with vitest's file tags, one
 * per line: `// @module-tag postgres`. `pnpm test:unit` runs the files that declare none, and the
 * sender's files of UNIT_PGLITE_FILES on PGlite alone; `test/test-tags.test.ts` fails when a file
 * reaches for one of these without declaring it.
 * The full run (`pnpm test`) runs every file, whatever its tags.
 */
export const TEST_TAGS = [
  { name: 'redis', description: 'Redis at TEST_REDIS_URL (default redis://127.0.0.1:6379)' },
  {
    name: 'postgres',
    description: 'PostgreSQL at TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test)',
  },
  { name: 'browser', description: "Chromium (Debian's chromium package) for the dashboard's browser tests" },
  {
    name: 'process',
    description: 'starts child processes: the CLI, sender or receiver processes, redis-server, npm, tsc',
  },
  { name: 'build', description: 'runs the built packages (dist/): `pnpm build` first' },
  {
    name: 'pglite',
    description:
      'opens an embedded PGlite database: no service, but seconds per file; test:unit runs only UNIT_PGLITE_FILES',
  },
] as const;

export type TestTag = (typeof TEST_TAGS)[number]['name'];

// The pattern vitest reads file tags with, so that both agree on what a file declares.
const MODULE_TAG = /(?:\/\/|\*)\s*@module-tag\s+([\w\-/]+)\b/g;

/** The tags a test file's source declares. */
export function declaredTags(source: string): string[] {
  return [...source.matchAll(MODULE_TAG)].map((match) => match[1] as string);
}

/** The `*.test.ts` files under `dir`, recursively, as absolute paths. */
export function testFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== 'node_modules') out.push(...testFiles(path));
    } else if (entry.name.endsWith('.test.ts')) {
      out.push(path);
    }
  }
  return out;
}

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

/**
 * The tagged files `pnpm test:unit` runs too, from the repository's root: the sender's logic on
 * PGlite, each file opening copies of one migrated template (test/support/pglite-template.ts) and
 * taking its storages from `testStorages()` (packages/sender/test/fixtures/storage.ts), which
 * leaves PostgreSQL to the full run. Chosen by what they cover per second of a two-core machine,
 * to keep the whole loop under 60 s (docs/development.md, "The unit loop").
 */
export const UNIT_PGLITE_FILES: readonly string[] = [
  'packages/sender/test/api.test.ts',
  'packages/sender/test/delivery.test.ts',
  'packages/sender/test/idempotency.test.ts',
  'packages/sender/test/payments.test.ts',
  'packages/sender/test/signing.test.ts',
  'packages/sender/test/webhook-endpoints-delivery.test.ts',
  'packages/sender/test/webhook-endpoints.test.ts',
];

/** The tags a file of UNIT_PGLITE_FILES may declare. */
export const UNIT_PGLITE_TAGS: readonly TestTag[] = ['pglite', 'postgres'];

/**
 * The test files under `root/test` that `pnpm test:unit` leaves out, relative to `root` (an exclude
 * list): those that declare a tag, except UNIT_PGLITE_FILES.
 */
export function unitExcludedFiles(root: string): string[] {
  const kept = new Set(UNIT_PGLITE_FILES);
  return testFiles(join(root, 'test'))
    .filter((file) => declaredTags(readFileSync(file, 'utf8')).length > 0)
    .filter((file) => !kept.has(relative(repoRoot, file).split('\\').join('/')))
    .map((file) => relative(root, file));
}
