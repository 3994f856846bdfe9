import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  declaredTags,
  TEST_TAGS,
  type TestTag,
  testFiles,
  UNIT_PGLITE_FILES,
  UNIT_PGLITE_TAGS,
} from './support/test-tags.js';

// `pnpm test:unit` runs the test files that declare no tag. This keeps the tags honest: a file
// whose code (or a test helper it imports) reaches for a service, a child process, the build, a
// browser or a database must declare it, so that the fast loop never needs one.

const root = fileURLToPath(new URL('..', import.meta.url));

interface Rule {
  /** Any of these tags declares what the evidence shows. */
  tags: TestTag[];
  what: string;
  evidence: RegExp;
  /** Whether the helpers the file imports count, or only the test file itself. */
  throughImports: boolean;
}

const RULES: Rule[] = [
  { tags: ['process'], what: 'starts a child process', evidence: /node:child_process/, throughImports: true },
  { tags: ['build'], what: 'runs the built files', evidence: /\bdist\//, throughImports: true },
  { tags: ['redis'], what: 'reaches Redis', evidence: /TEST_REDIS_URL|from 'ioredis'/, throughImports: true },
  { tags: ['browser'], what: 'drives a browser', evidence: /chromium|playwright/i, throughImports: true },
  // Helpers take the storage as an argument (`openTestDatabase(storage, ...)`): the test file is
  // where PostgreSQL is chosen.
  {
    tags: ['postgres'],
    what: 'reaches PostgreSQL',
    evidence: /TEST_DATABASE_URL|'postgres'|from 'pg'|startScratchPostgres/,
    throughImports: false,
  },
  {
    tags: ['pglite', 'postgres'],
    what: 'opens a database',
    evidence: /\b(?:openDatabase|openTestDatabase|startTestApp|startSender|startDashboardSender)\(/,
    throughImports: true,
  },
];

const IMPORT = /\bfrom\s*['"](\.[^'"]+)['"]|\bimport\(\s*['"](\.[^'"]+)['"]\s*\)/g;

/** The test helpers `file` imports, directly or not; package sources (`src/`) are not helpers. */
function helpers(file: string, seen = new Set<string>()): Set<string> {
  for (const match of readFileSync(file, 'utf8').matchAll(IMPORT)) {
    const base = resolve(dirname(file), (match[1] ?? match[2]) as string);
    const target = [base.replace(/\.js$/, '.ts'), base].find((path) => existsSync(path));
    if (!target || seen.has(target) || /[\\/](?:src|node_modules)[\\/]/.test(target)) continue;
    seen.add(target);
    helpers(target, seen);
  }
  return seen;
}

const files = [
  join(root, 'test'),
  ...['cli', 'core', 'express', 'fastify', 'koa', 'redis', 'sender'].map((p) =>
    join(root, 'packages', p, 'test'),
  ),
]
  .flatMap((dir) => testFiles(dir))
  // This file names the evidence it looks for.
  .filter((file) => file !== fileURLToPath(import.meta.url))
  .sort();

describe('test tags', () => {
  it('finds the test files', () => {
    expect(files.length).toBeGreaterThan(50);
    expect(files.map((file) => relative(root, file))).toContain('packages/core/test/receiver.test.ts');
  });

  it('every tag a file declares is defined in test/support/test-tags.ts', () => {
    const known = new Set<string>(TEST_TAGS.map((tag) => tag.name));
    const unknown = files.flatMap((file) =>
      declaredTags(readFileSync(file, 'utf8'))
        .filter((tag) => !known.has(tag))
        .map((tag) => `${relative(root, file)}: unknown tag "${tag}"`),
    );
    expect(unknown).toEqual([]);
  });

  it('every file that reaches for a service, a process, the build, a browser or a database says so', () => {
    const missing: string[] = [];
    for (const file of files) {
      const own = readFileSync(file, 'utf8');
      const declared = new Set(declaredTags(own));
      const imported = [...helpers(file)].map((path) => ({ path, text: readFileSync(path, 'utf8') }));
      for (const rule of RULES) {
        if (rule.tags.some((tag) => declared.has(tag))) continue;
        const where = [{ path: file, text: own }, ...(rule.throughImports ? imported : [])].find(({ text }) =>
          rule.evidence.test(text),
        );
        if (where) {
          const through = where.path === file ? '' : ` (through ${relative(root, where.path)})`;
          missing.push(
            `${relative(root, file)} ${rule.what}${through}: declare ${rule.tags.map((tag) => `"// @module-tag ${tag}"`).join(' or ')} at its top`,
          );
        }
      }
    }
    expect(missing).toEqual([]);
  });
});

// The tagged files `pnpm test:unit` runs too: on PGlite alone, so nothing of theirs may reach for
// PostgreSQL except through `testStorages()`, which leaves it out there.
describe('the unit loop on PGlite', () => {
  const units = UNIT_PGLITE_FILES.map((file) => ({ file, path: join(root, file) }));

  it('runs files that exist and need nothing beyond PGlite and PostgreSQL', () => {
    const wrong = units.flatMap(({ file, path }) => {
      if (!existsSync(path)) return [`${file}: no such file`];
      const tags = declaredTags(readFileSync(path, 'utf8'));
      const extra = tags.filter((tag) => !(UNIT_PGLITE_TAGS as readonly string[]).includes(tag));
      if (!tags.includes('pglite')) return [`${file}: declares no "pglite" (an untagged file runs anyway)`];
      return extra.length > 0 ? [`${file}: declares ${extra.join(', ')}, which the unit loop refuses`] : [];
    });
    expect(wrong).toEqual([]);
  });

  it('reaches PostgreSQL, where a file does, only through testStorages()', () => {
    const wrong = units.flatMap(({ file, path }) => {
      const text = existsSync(path) ? readFileSync(path, 'utf8') : '';
      if (!declaredTags(text).includes('postgres')) return [];
      const own =
        /TEST_DATABASE_URL|from 'pg'|startScratchPostgres|\[\s*'(?:pglite|postgres)',\s*'(?:pglite|postgres)'\s*\]/;
      if (!/\btestStorages\(\)/.test(text)) return [`${file}: takes no storages from testStorages()`];
      return own.test(text) ? [`${file}: names PostgreSQL itself (${own.exec(text)?.[0]})`] : [];
    });
    expect(wrong).toEqual([]);
  });
});
