import { copyFile } from 'node:fs/promises';
import { defineConfig } from 'tsup';
import { packageBuild } from '../../tsup.config.base.js';

// The library, its internal subpath (`@payhook/sender/internal`, for the benchmarks), and the
// service's entry point (`pnpm --filter @payhook/sender start`). PGlite's thread loads
// `pglite-host.js` beside the code (`new URL(..., import.meta.url)`, shimmed in the CommonJS
// build): the build copies it from src/db as it is.
export default defineConfig({
  ...packageBuild,
  entry: { index: 'src/index.ts', internal: 'src/internal.ts', main: 'src/main.ts' },
  shims: true,
  // Copied by Node, not by a shell's `cp`: the build runs on Windows too.
  onSuccess: () => copyFile('src/db/pglite-host.js', 'dist/pglite-host.js'),
});
