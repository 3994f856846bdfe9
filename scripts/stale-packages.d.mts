/** A package of the workspace with a build script, as scripts/stale-packages.mjs reads it. */
export interface WorkspacePackage {
  /** Its directory under packages/. */
  dir: string;
  name: string;
  /** The workspace packages it depends on (`workspace:` ranges), by name. */
  deps: string[];
  hasBuild: boolean;
}

/** The packages under `<root>/packages` that have a build, dependencies before their dependents. */
export declare function workspacePackages(root: string): WorkspacePackage[];

/**
 * Each package with a build, dependencies first: whether it has to be built again and why
 * (`not built yet`, `changed since its last build`, `a dependency is built again`, `a dependency
 * was built after it`).
 */
export declare function buildPlan(
  root: string,
): (WorkspacePackage & { stale: boolean; reason: string | undefined; distNewest: number })[];
