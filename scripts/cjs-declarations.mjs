// After tsup, in a package whose declarations name typebox (core, and the sender's API types): the
// CommonJS declarations (dist/*.d.cts, or those of the folder given) take typebox's types as
// type-only imports resolved as ESM (`resolution-mode: import`, TypeScript 5.3+), since typebox
// ships ESM only and a CommonJS project cannot import it (TS1479); the side-effect imports tsup
// leaves are dropped. Run from the package's folder: `node ../../scripts/cjs-declarations.mjs`.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const dist = resolve(process.argv[2] ?? 'dist');
const ESM_ONLY = ['typebox'];
let changed = 0;
for (const name of readdirSync(dist).filter((f) => f.endsWith('.d.cts'))) {
  const path = join(dist, name);
  const before = readFileSync(path, 'utf8');
  let after = before;
  for (const module of ESM_ONLY) {
    const quoted = `'${module}'`;
    after = after
      .replaceAll(`import ${quoted};\n`, '')
      .replace(
        new RegExp(`^import \\{([^}]*)\\} from ${quoted};$`, 'gm'),
        `import type {$1} from ${quoted} with { 'resolution-mode': 'import' };`,
      );
  }
  if (after !== before) {
    writeFileSync(path, after);
    changed++;
  }
}
console.log(`cjs-declarations: ${changed} declaration file(s) take ESM-only types as type-only imports`);
