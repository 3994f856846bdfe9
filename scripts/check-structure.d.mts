/** Per package, its source directories from the bottom layer up (see docs/architecture.md). */
export declare const LAYERS: Record<string, string[][]>;

/**
 * What is wrong with the sources of the packages under `<base>/packages` (import cycles, files over
 * 400 lines, imports up a layer, directories without a layer), one line each; empty when nothing is.
 */
export declare function structureProblems(base?: string, layering?: Record<string, string[][]>): string[];
