import { defineConfig } from 'tsup';

// ESM and CommonJS. typebox ships ESM only; the CommonJS build requires it as it is, which Node
// 20.19 and newer load with require() (the supported floor; docs/decisions.md).
export default defineConfig({
  entry: { index: 'src/index.ts', testing: 'src/testing/index.ts' },
  format: ['esm', 'cjs'],
  dts: true,
  sourcemap: true,
  clean: true,
  target: 'node20',
});
