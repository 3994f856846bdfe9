import { defineConfig } from 'tsup';

// ESM and CommonJS. typebox ships ESM only; the CommonJS build requires it as it is, which Node
// 20.19 and newer load with require() (the supported floor; docs/decisions.md).
//
// The event schemas are an entry of their own, so that the ESM build keeps them (and its import of
// typebox) in a module apart from the rest: `Type.Object(...)` calls at the top level cannot be
// proven pure, nor can typebox's own modules, which have no `sideEffects` field, so a bundler keeps
// every one it is given. In a module of their own, "sideEffects": false lets an app's bundler drop
// the schemas, typebox with them, when nothing imports them (a Worker that receives: 50 KB of
// minified and gzipped bundle, 26 KB without; docs/decisions.md, "The bundle users get").
// The declarations stay two files, index and testing.
export default defineConfig({
  entry: { index: 'src/index.ts', testing: 'src/testing/index.ts', schemas: 'src/events/schemas.ts' },
  format: ['esm', 'cjs'],
  dts: { entry: { index: 'src/index.ts', testing: 'src/testing/index.ts' } },
  sourcemap: true,
  clean: true,
  target: 'node20',
});
