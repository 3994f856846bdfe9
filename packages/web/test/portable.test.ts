// The handler runs where there is no Node: its sources import no Node built-in and use no Node
// global, so a bundle for Workers or a browser platform takes nothing from Node through it.
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const srcDir = new URL('../src/', import.meta.url);
const sources = readdirSync(srcDir)
  .filter((name) => name.endsWith('.ts'))
  .map((name) => ({ name, text: readFileSync(new URL(name, srcDir), 'utf8') }));

describe('@payhook/web sources', () => {
  it('are all read', () => {
    expect(sources.map((s) => s.name).sort()).toEqual(['index.ts', 'platform.ts', 'read-body.ts']);
  });

  for (const { name, text } of sources) {
    it(`${name} imports only @payhook/core and its own modules, and uses no Node global`, () => {
      // Comments aside (their examples import what a merchant imports).
      const code = text.replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, '');
      const specifiers = [...code.matchAll(/\bfrom\s+'([^']+)'/g)].map((m) => m[1]);
      for (const specifier of specifiers) expect(specifier).toMatch(/^(@payhook\/core|\.\/[\w-]+\.js)$/);
      expect(code).not.toMatch(/\b(Buffer|process|require|__dirname|setImmediate|global)\b/);
    });
  }
});
