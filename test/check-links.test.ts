import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { anchorsOf, linkProblems, linksOf, slug } from '../scripts/check-links.mjs';

const made: string[] = [];
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A repository of its own: `files` maps a path to its text. */
function repo(files: Record<string, string>): string {
  const base = mkdtempSync(join(tmpdir(), 'payhook-links-'));
  made.push(base);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(base, path)), { recursive: true });
    writeFileSync(join(base, path), text);
  }
  return base;
}

describe('check-links: anchors as GitHub makes them', () => {
  it.each([
    ["The sender's layers", 'the-senders-layers'],
    ['Signatures beside the checksum', 'signatures-beside-the-checksum'],
    ['A 2x-naive target: 1.2 ms (p99)', 'a-2x-naive-target-12-ms-p99'],
    ['snake_case and kebab-case', 'snake_case-and-kebab-case'],
    ['Über café', 'über-café'],
    ['two  spaces', 'two--spaces'],
  ])('%s -> #%s', (heading, anchor) => {
    expect(slug(heading)).toBe(anchor);
  });

  it('unwraps code, links and emphasis, numbers repeated headings, and reads no fenced code', () => {
    const text = [
      '# `payhook listen`',
      '## [Stores](stores.md) and **bold** and *em*',
      '## Tests',
      '### Tests',
      '```sh',
      '# Tests',
      '```',
      'Setext heading',
      '--------------',
      '<a id="kept-anchor"></a>',
    ].join('\n');
    expect([...anchorsOf(text)].sort()).toEqual(
      [
        'kept-anchor',
        'payhook-listen',
        'setext-heading',
        'stores-and-bold-and-em',
        'tests',
        'tests-1',
      ].sort(),
    );
  });

  it('reads inline links and definitions, not those in inline code or fenced code', () => {
    const text = 'See [a](a.md#x) and `[b](b.md)`.\n```\n[c](c.md)\n```\n[d]: d.md#y "title"\n';
    expect(linksOf(text)).toEqual([
      { target: 'a.md#x', line: 1 },
      { target: 'd.md#y', line: 5 },
    ]);
  });
});

describe('check-links: a repository', () => {
  it('names each missing file and anchor, and passes what resolves', () => {
    const base = repo({
      'README.md': [
        '# Project',
        '[ok](docs/guide.md#first-steps) [dir](docs) [self](#project) [web](https://example.com/x.md#y)',
        '[gone](docs/missing.md) [bad anchor](docs/guide.md#second-steps)',
        '[code](packages/a/src/index.ts) [local](#nowhere)',
      ].join('\n'),
      'docs/guide.md': '# Guide\n\n## First steps\n\n[back](../README.md#project)\n',
      'packages/a/src/index.ts': 'export {};\n',
    });
    expect(linkProblems(base)).toEqual([
      'README.md:3: docs/missing.md: no docs/missing.md',
      'README.md:3: docs/guide.md#second-steps: no heading with the anchor #second-steps in docs/guide.md',
      'README.md:4: #nowhere: no heading with the anchor #nowhere in README.md',
    ]);
  });

  it("the repository's own Markdown has no broken relative link or anchor", () => {
    expect(linkProblems()).toEqual([]);
  });
});
