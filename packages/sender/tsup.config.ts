import { defineConfig } from 'tsup';
import { packageBuild } from '../../tsup.config.base.js';

// The library, and the service's entry point (`pnpm --filter @payhook/sender start`).
export default defineConfig({ ...packageBuild, entry: { index: 'src/index.ts', main: 'src/main.ts' } });
