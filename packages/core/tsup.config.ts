import { defineConfig } from 'tsup';

const shared = {
  entry: { index: 'src/index.ts', testing: 'src/testing/index.ts' },
  dts: true,
  sourcemap: true,
  target: 'node20',
} as const;

export default defineConfig([
  { ...shared, format: ['esm'], clean: true },
  {
    ...shared,
    format: ['cjs'],
    // typebox ships ESM only: the CommonJS build bundles it so that
    // require('@payhook/core') works on Node 20 (no require(esm) there).
    noExternal: ['typebox'],
  },
]);
