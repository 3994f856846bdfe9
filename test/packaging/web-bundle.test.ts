// @module-tag process
// @module-tag build
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NPM_FLAGS } from './outside-app.js';

// The Worker bundle a user gets: @payhook/web and @payhook/core packed as a release packs them,
// installed with npm into an app outside the workspace, and bundled from there by esbuild for the
// browser platform, minified, as a Worker's or an edge function's build does. What is measured is
// the published dist/, not the TypeScript sources (which split into more modules, and so
// tree-shake better). docs/decisions.md, "The bundle users get".

const root = fileURLToPath(new URL('../..', import.meta.url));
const run = promisify(execFile);

/** The esbuild that tsup uses (not a dependency of its own here). */
interface Esbuild {
  build(options: Record<string, unknown>): Promise<{
    outputFiles: { contents: Uint8Array; text: string }[];
    metafile: {
      outputs: Record<
        string,
        { inputs: Record<string, { bytesInOutput: number }>; imports: { path: string; external?: boolean }[] }
      >;
    };
  }>;
}
const esbuild = createRequire(createRequire(import.meta.url).resolve('tsup'))('esbuild') as Esbuild;

/** A Worker that receives: the Web handler's README example, with an allow-list and a v1a key. */
const WORKER = `import { createReceiver } from '@payhook/core';
import { createWebHandler } from '@payhook/web';
const receiver = createReceiver({ businessIds: ['b'], allowedIps: ['203.0.113.10'], signingPublicKeys: ['whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo='] });
receiver.on('payment.session.succeeded', async (event) => { console.log(event.data.amount); });
export default { fetch: createWebHandler(receiver) };
`;

/** The bound: minified and gzipped, in bytes. */
const BOUND = 30 * 1024;

const NODE_IMPORT =
  /(?:\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*)["'](?:node:)?(?:crypto|buffer|module|http|stream|os|fs|net|url|util|zlib|events|path)["']/;

let base = '';
let app = '';

beforeAll(async () => {
  for (const name of ['core', 'web']) {
    if (!existsSync(join(root, 'packages', name, 'dist'))) {
      throw new Error(`packages/${name}/dist is missing: run pnpm build first.`);
    }
  }
  base = await mkdtemp(join(tmpdir(), 'payhook-web-bundle-'));
  const tarballs = join(base, 'tarballs');
  for (const name of ['core', 'web']) {
    await run('pnpm', ['pack', '--out', join(tarballs, '%s.tgz')], {
      cwd: join(root, 'packages', name),
      timeout: 120_000,
    });
  }
  app = join(base, 'worker');
  await mkdir(app);
  await writeFile(join(app, 'package.json'), JSON.stringify({ name: 'worker-app', private: true }));
  const files = (await readdir(tarballs)).map((file) => join(tarballs, file));
  await run('npm', ['install', ...NPM_FLAGS, ...files], { cwd: app, timeout: 300_000 }).catch(
    (error: { stderr?: string }) => {
      throw new Error(`npm install of the core and web tarballs: ${error.stderr ?? error}`);
    },
  );
}, 420_000);

afterAll(async () => {
  if (base) await rm(base, { recursive: true, force: true });
});

describe('the Worker bundle users get', () => {
  it('@payhook/web with @payhook/core, from the tarballs, is at most 30 KB minified and gzipped', async () => {
    const result = await esbuild.build({
      stdin: { contents: WORKER, resolveDir: app, loader: 'js' },
      bundle: true,
      platform: 'browser',
      format: 'esm',
      minify: true,
      write: false,
      metafile: true,
      logLevel: 'silent',
    });
    const output = result.outputFiles[0] as { contents: Uint8Array; text: string };
    const [meta] = Object.values(result.metafile.outputs);
    if (meta === undefined) throw new Error('esbuild wrote no output');
    const inputs = Object.keys(meta.inputs);
    // Taken from the installed tarballs, not from the workspace.
    expect(inputs.some((path) => path.includes('node_modules/@payhook/core/dist/'))).toBe(true);
    expect(inputs.some((path) => path.includes('node_modules/@payhook/web/dist/'))).toBe(true);
    expect(inputs.filter((path) => path.includes('packages/'))).toEqual([]);
    // The event schemas, and typebox with them, are left out: the receiver validates by hand.
    expect(inputs.filter((path) => path.includes('typebox'))).toEqual([]);
    expect(output.text).not.toMatch(NODE_IMPORT);
    expect(meta.imports.filter((i) => i.external)).toEqual([]);

    const gzip = gzipSync(output.contents).length;
    // What takes the room, heaviest first, to say where to look when the bound fails.
    const weights = Object.entries(meta.inputs)
      .map(([path, { bytesInOutput }]) => `${bytesInOutput} ${path.replace(/^.*node_modules\//, '')}`)
      .sort((a, b) => Number.parseInt(b, 10) - Number.parseInt(a, 10))
      .slice(0, 12)
      .join('\n');
    console.info(`@payhook/web with @payhook/core, packed: ${gzip} bytes minified and gzipped`);
    expect(gzip, weights).toBeLessThanOrEqual(BOUND);
  });
});
