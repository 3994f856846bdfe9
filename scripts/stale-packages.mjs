// Which packages a build has to make again: the one answer `pnpm build`, `pnpm demo` and
// `pnpm pack:all` share, so that one build serves all three. A package is built again when its
// output directory (dist) is missing, when anything its build reads changed after that directory
// was written (its src/, scripts/, package.json, tsup and TypeScript configs, the shared configs,
// the lockfile), or when a workspace package it depends on is built again or was built after it
// (its declarations are built against that package's).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** What every package's build reads from the repository's root. */
const SHARED_INPUTS = ['tsup.config.base.ts', 'tsconfig.base.json', 'pnpm-lock.yaml'];
/** What a package's build reads from its own directory. */
const PACKAGE_INPUTS = ['src', 'scripts', 'package.json', 'tsup.config.ts', 'tsconfig.json'];

/**
 * The newest and oldest modification times under `path`, directories included (a deleted file
 * changes its directory's time); undefined if `path` does not exist.
 */
function mtimes(path) {
  let stat;
  try {
    stat = statSync(path);
  } catch {
    return undefined;
  }
  let newest = stat.mtimeMs;
  let oldest = stat.isDirectory() ? Infinity : stat.mtimeMs;
  if (stat.isDirectory()) {
    for (const entry of readdirSync(path)) {
      const inner = mtimes(join(path, entry));
      if (!inner) continue;
      newest = Math.max(newest, inner.newest);
      oldest = Math.min(oldest, inner.oldest);
    }
  }
  return { newest, oldest };
}

/** The packages under packages/, dependencies before their dependents. */
export function workspacePackages(root) {
  const found = readdirSync(join(root, 'packages'))
    .filter((dir) => {
      try {
        return statSync(join(root, 'packages', dir, 'package.json')).isFile();
      } catch {
        return false;
      }
    })
    .map((dir) => {
      const manifest = JSON.parse(readFileSync(join(root, 'packages', dir, 'package.json'), 'utf8'));
      const all = { ...manifest.dependencies, ...manifest.devDependencies, ...manifest.peerDependencies };
      const deps = Object.entries(all)
        .filter(([, range]) => String(range).startsWith('workspace:'))
        .map(([name]) => name);
      return { dir, name: manifest.name, deps, hasBuild: Boolean(manifest.scripts?.build) };
    });
  const byName = new Map(found.map((p) => [p.name, p]));
  const ordered = [];
  const placed = new Set();
  const place = (pkg, path = []) => {
    if (placed.has(pkg.name)) return;
    if (path.includes(pkg.name))
      throw new Error(`workspace dependency cycle: ${[...path, pkg.name].join(' -> ')}`);
    for (const dep of pkg.deps) {
      const inner = byName.get(dep);
      if (inner) place(inner, [...path, pkg.name]);
    }
    placed.add(pkg.name);
    ordered.push(pkg);
  };
  for (const pkg of found.sort((a, b) => a.dir.localeCompare(b.dir))) place(pkg);
  return ordered.filter((p) => p.hasBuild);
}

/**
 * Each package with a build, dependencies first, and whether it has to be built again (`stale`)
 * and why (`reason`, for the progress line).
 */
export function buildPlan(root) {
  const shared = Math.max(...SHARED_INPUTS.map((file) => mtimes(join(root, file))?.newest ?? 0));
  const plan = new Map();
  for (const pkg of workspacePackages(root)) {
    const dir = join(root, 'packages', pkg.dir);
    const dist = mtimes(join(dir, 'dist'));
    const inputs = Math.max(shared, ...PACKAGE_INPUTS.map((file) => mtimes(join(dir, file))?.newest ?? 0));
    const deps = pkg.deps.map((name) => plan.get(name)).filter(Boolean);
    let reason;
    if (!dist || dist.oldest === Infinity) reason = 'not built yet';
    else if (inputs >= dist.oldest) reason = 'changed since its last build';
    else if (deps.some((d) => d.stale)) reason = 'a dependency is built again';
    else if (deps.some((d) => d.distNewest >= dist.oldest)) reason = 'a dependency was built after it';
    plan.set(pkg.name, { ...pkg, stale: reason !== undefined, reason, distNewest: dist?.newest ?? 0 });
  }
  return [...plan.values()];
}
