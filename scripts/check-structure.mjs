#!/usr/bin/env node
// Part of `pnpm lint`: keeps each package's sources in the shape docs/design.md describes ("Shape
// checks"). It fails on
//   - an import cycle between the modules of a package (type-only imports included: a cycle of
//     types is still two files that cannot be read apart),
//   - a source file over MAX_LINES lines, and
//   - an import that runs upward between the directories of a package that has LAYERS (the
//     sender's, drawn in docs/architecture.md, "The sender's layers"), or a directory without a layer,
//   - a statement that writes a table outside the modules that own its writes (WRITERS).
// Relative imports only: packages depend on each other through their public entry points, and the
// workspace's dependency order already rules out cycles between packages.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const MAX_LINES = 400;
// Per package, its source directories from the bottom up: a module may import from its own
// directory's layer and the layers below, never above. Files at the top of `src` are not layered:
// the shared leaves (errors, ids, logger, timestamps...) and the entry points (service, index).
export const LAYERS = {
  sender: [
    ['db', 'net'],
    ['signing'],
    ['auth'],
    // One layer: an endpoint's lifecycle drives its deliveries' states (hold, resume, the
    // deleted-endpoint exit), and the fan-out and the worker read its filter and rate limit.
    ['delivery', 'endpoints'],
    ['payments', 'listen'],
    ['http', 'dashboard'],
  ],
};
// Per package, the tables whose writes have one owner: the paths under `src` (a directory ends
// with `/`) that may hold a statement writing each. Every other module reads them only. The
// deliveries' transitions are the statements of delivery/sql/, exported by delivery-state.ts
// (docs/architecture.md, "A delivery's life"); an endpoint's row is written by endpoints/ (its
// lifecycle) and by the migrations that made or backfill it.
export const WRITERS = {
  sender: {
    deliveries: ['delivery/sql/', 'delivery/delivery-state.ts'],
    webhook_endpoints: ['endpoints/', 'db/migrations.ts', 'db/migrations/'],
  },
};
const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const IMPORT =
  /(?:^|\n)\s*(?:import|export)\b[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/g;

function sourceFiles(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sourceFiles(path));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

/** The file a relative specifier names: `./x.js` is `./x.ts`, a directory its `index.ts`. */
function resolveImport(from, specifier, known) {
  const base = resolve(dirname(from), specifier);
  for (const candidate of [base.replace(/\.js$/, '.ts'), `${base}.ts`, join(base, 'index.ts')]) {
    if (known.has(candidate)) return candidate;
  }
  return undefined;
}

/** Strongly connected components with more than one module (or a module importing itself). */
function cycles(graph) {
  let index = 0;
  const indices = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const found = [];
  const visit = (v) => {
    indices.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!indices.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v), indices.get(w)));
      }
    }
    if (low.get(v) === indices.get(v)) {
      const component = [];
      let w;
      do {
        w = stack.pop();
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component);
    }
  };
  for (const v of graph.keys()) if (!indices.has(v)) visit(v);
  return found;
}

/** A statement of Kysely's builder or of raw SQL that writes `table`. */
const writing = (table) =>
  new RegExp(
    `\\b(?:insertInto|updateTable|deleteFrom)\\(\\s*['"\`]${table}['"\`]|\\b(?:insert\\s+into|update|delete\\s+from)\\s+${table}\\b`,
    'i',
  );

/** `text` without its comments: prose may name a statement it does not run. */
const code = (text) => text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');

/** The tables of `owners` that `file` (a path under `src`, with `/`) writes without owning them. */
function strayWrites(file, text, owners) {
  const body = code(text);
  return Object.entries(owners)
    .filter(([, paths]) => !paths.some((p) => (p.endsWith('/') ? file.startsWith(p) : file === p)))
    .filter(([table]) => writing(table).test(body))
    .map(([table, paths]) => `${table} (only ${paths.join(', ')} may)`);
}

/** What is wrong with the sources of the packages under `<base>/packages`, one line each. */
export function structureProblems(base = root, layering = LAYERS, writers = WRITERS) {
  const problems = [];
  const packagesDir = join(base, 'packages');
  for (const pkg of readdirSync(packagesDir)) {
    const src = join(packagesDir, pkg, 'src');
    let files;
    try {
      files = sourceFiles(src);
    } catch {
      continue;
    }
    const known = new Set(files);
    const graph = new Map();
    const layers = layering[pkg];
    // The layer of a file in a directory of `src`, or undefined at the top of `src`.
    const directory = (file) => relative(src, file).split(/[\\/]/).slice(0, -1)[0];
    const layerOf = (dir) => layers.findIndex((names) => names.includes(dir));
    if (layers) {
      for (const dir of new Set(files.map(directory))) {
        if (dir !== undefined && layerOf(dir) < 0) {
          problems.push(
            `${relative(base, join(src, dir))}/: no layer (add it to LAYERS here and to docs/architecture.md)`,
          );
        }
      }
    }
    for (const file of files) {
      const text = readFileSync(file, 'utf8');
      const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
      if (lines > MAX_LINES) {
        problems.push(`${relative(base, file)}: ${lines} lines (at most ${MAX_LINES}: split it by concern)`);
      }
      const inSrc = relative(src, file).split(/[\\/]/).join('/');
      for (const table of strayWrites(inSrc, text, writers[pkg] ?? {})) {
        problems.push(`${relative(base, file)} writes ${table}`);
      }
      const edges = [];
      for (const match of text.matchAll(IMPORT)) {
        const specifier = match[1] ?? match[2];
        if (!specifier?.startsWith('.')) continue;
        const target = resolveImport(file, specifier, known);
        if (target) edges.push(target);
        const [from, to] = [directory(file), target && directory(target)];
        // A directory without a layer is reported once, above, not at each of its imports.
        if (
          layers &&
          from !== undefined &&
          to !== undefined &&
          layerOf(from) >= 0 &&
          layerOf(to) > layerOf(from)
        ) {
          problems.push(
            `${relative(base, file)} imports ${relative(base, target)}: ${to}/ is a layer above ${from}/`,
          );
        }
      }
      graph.set(file, edges);
    }
    for (const component of cycles(graph)) {
      problems.push(`import cycle: ${component.map((f) => relative(base, f)).join(' <-> ')}`);
    }
  }
  return problems;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const problems = structureProblems();
  if (problems.length > 0) {
    for (const problem of problems) console.error(`check-structure: ${problem}`);
    process.exit(1);
  }
  console.log(
    'check-structure: no import cycles, no source file over 400 lines, no import up a layer, no table written outside its owners',
  );
}
