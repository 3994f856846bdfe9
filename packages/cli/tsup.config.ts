import { defineConfig } from 'tsup';

// The command is an executable ES module for Node 20; nothing imports it, so no declarations.
export default defineConfig({
  entry: { cli: 'src/cli.ts' },
  format: ['esm'],
  clean: true,
  sourcemap: true,
  target: 'node20',
  banner: { js: '#!/usr/bin/env node' },
});
