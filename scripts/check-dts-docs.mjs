#!/usr/bin/env node
// Part of `pnpm lint` (which `pnpm test` runs after the build): every symbol a package exports
// through its public entry points has a doc comment in the built declarations, which is what an
// editor shows a merchant. A comment in the sources is not enough: the declaration bundler drops
// some (a re-export, a doc on an inner function), so the check reads `dist`.
//
// Entry points: the `types` files of every `exports` entry of each package under packages/,
// except `internal` subpaths (not public) and `./package.json`. Each export of an entry module is
// followed through aliases and re-exports to its declarations; it is documented when one of them
// carries a JSDoc comment (a description or a tag).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const packagesDir = join(root, 'packages');

/** The declaration files of a package's public entry points, from its `exports`. */
function entryDeclarations(pkgDir) {
  const pkg = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'));
  const files = new Set();
  const collect = (target) => {
    if (typeof target === 'string') {
      if (/\.d\.[cm]?ts$/.test(target)) files.add(join(pkgDir, target));
    } else if (target && typeof target === 'object') {
      for (const [condition, value] of Object.entries(target)) {
        if (condition === 'types' && typeof value === 'string') files.add(join(pkgDir, value));
        else collect(value);
      }
    }
  };
  const exports = pkg.exports ?? {};
  if (typeof exports === 'string' || !Object.keys(exports).some((k) => k.startsWith('.'))) collect(exports);
  else
    for (const [subpath, target] of Object.entries(exports)) {
      if (subpath === './package.json' || /(^|\/)internal(\/|$)/.test(subpath)) continue;
      collect(target);
    }
  if (files.size === 0 && typeof pkg.types === 'string') files.add(join(pkgDir, pkg.types));
  return { name: pkg.name, files: [...files] };
}

function hasJsDoc(declaration) {
  // A variable's comment sits on its statement; getJSDocCommentsAndTags walks up to it.
  return ts.getJSDocCommentsAndTags(declaration).length > 0;
}

/** The symbols of `file`'s exports that no declaration documents. */
function undocumented(program, file) {
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(file);
  const moduleSymbol = source && checker.getSymbolAtLocation(source);
  if (!moduleSymbol) return { names: [], missing: [] };
  const names = [];
  const missing = [];
  for (const exported of checker.getExportsOfModule(moduleSymbol)) {
    names.push(exported.name);
    // An `export { a as b }` or a re-export is an alias: its own declaration is the specifier.
    const aliasDocumented = (exported.declarations ?? []).some(hasJsDoc);
    const target = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
    const declarations = target.declarations ?? [];
    const documented =
      aliasDocumented ||
      declarations.some(hasJsDoc) ||
      target.getDocumentationComment(checker).length > 0 ||
      target.getJsDocTags(checker).length > 0;
    if (!documented) missing.push(exported.name);
  }
  return { names, missing };
}

const failures = [];
let checked = 0;
for (const dir of readdirSync(packagesDir).sort()) {
  const pkgDir = join(packagesDir, dir);
  if (!existsSync(join(pkgDir, 'package.json'))) continue;
  const { name, files } = entryDeclarations(pkgDir);
  if (files.length === 0) continue; // no library API (the CLI)
  const absent = files.filter((f) => !existsSync(f));
  if (absent.length > 0) {
    failures.push(`${name}: ${absent.map((f) => relative(root, f)).join(', ')} missing: run \`pnpm build\``);
    continue;
  }
  const program = ts.createProgram(files, {
    noEmit: true,
    skipLibCheck: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
  });
  for (const file of files) {
    const { names, missing } = undocumented(program, file);
    checked += names.length;
    if (names.length === 0)
      failures.push(`${name}: ${relative(root, file)} exports nothing the checker can read`);
    if (missing.length > 0)
      failures.push(`${name} (${relative(root, file)}): no doc comment on ${missing.sort().join(', ')}`);
  }
}

if (failures.length > 0) {
  console.error(
    `Exported symbols without a doc comment in the built declarations:\n${failures.map((f) => `  ${f}`).join('\n')}\n` +
      'Add a JSDoc comment (with an @example for functions and classes) in the sources and run `pnpm build`.',
  );
  process.exit(1);
}
console.log(`check-dts-docs: ${checked} exported symbols documented`);
