import { defineConfig } from 'tsup';
import { packageBuild } from '../../tsup.config.base.js';

// Runs on Node 20 and later, Bun, Deno, Workers and in bundlers: built for ES2022, no Node built-ins.
export default defineConfig({ ...packageBuild, target: 'es2022', platform: 'neutral' });
