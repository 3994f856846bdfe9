/** Per package, its source directories from the bottom layer up (see docs/architecture.md). */
export declare const LAYERS: Record<string, string[][]>;

/**
 * Per package, the tables whose writes have owners: for each table, the paths under `src` that may
 * hold a statement writing it (one ending in `/` is a directory).
 */
export declare const WRITERS: Record<string, Record<string, string[]>>;

/**
 * What is wrong with the sources of the packages under `<base>/packages` (import cycles, files over
 * 400 lines, imports up a layer, directories without a layer, tables written outside their
 * owners), one line each; empty when nothing is.
 */
export declare function structureProblems(
  base?: string,
  layering?: Record<string, string[][]>,
  writers?: Record<string, Record<string, string[]>>,
): string[];
