import { fileURLToPath } from 'node:url';

// The workspace's root: the packages this app uses are linked from there.
const root = fileURLToPath(new URL('../..', import.meta.url));

/** @type {import('next').NextConfig} */
export default {
  turbopack: { root },
  outputFileTracingRoot: root,
};
