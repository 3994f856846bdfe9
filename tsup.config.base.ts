import type { Options } from 'tsup';

/** The build of every adapter and store package: ESM and CJS with declarations, for Node 20. */
export const packageBuild: Options = {
  entry: { index: 'src/index.ts' },
  format: ['esm', 'cjs'],
  dts: true,
  sourcemap: true,
  clean: true,
  target: 'node20',
};
