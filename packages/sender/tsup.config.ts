import { defineConfig } from 'tsup';
import { packageBuild } from '../../tsup.config.base.js';

// The library, its internal subpath (`@payhook/sender/internal`, for the benchmarks), and the
// service's entry point (`pnpm --filter @payhook/sender start`).
export default defineConfig({
  ...packageBuild,
  entry: { index: 'src/index.ts', internal: 'src/internal.ts', main: 'src/main.ts' },
});
