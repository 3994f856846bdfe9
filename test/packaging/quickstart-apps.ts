import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';

// What the quickstarts test (quickstarts.test.ts) takes from the docs and runs: each page's code
// block as a reader copies it, and `payhook` as a reader runs it.

const run = promisify(execFile);

/**
 * The first code block after the heading `heading` (`## Hono`, `### Koa`) in the Markdown file at
 * `path`: the quickstart as a reader pastes it. Throws when the page has no such block, so that a
 * renamed heading fails the test rather than testing nothing.
 */
export function quickstartBlock(path: string, heading: string): string {
  const lines = readFileSync(path, 'utf8').split('\n');
  const at = lines.indexOf(heading);
  if (at < 0) throw new Error(`${path} has no heading "${heading}"`);
  const start = lines.findIndex((line, i) => i > at && /^```(js|ts|javascript|typescript)\s*$/.test(line));
  const end = lines.findIndex((line, i) => i > start && /^```\s*$/.test(line));
  if (start < 0 || end < 0) throw new Error(`${path}: no code block after "${heading}"`);
  return `${lines.slice(start + 1, end).join('\n')}\n`;
}

/** `payhook <args>` from the built command line; its standard output, or its error with both outputs. */
export async function payhook(
  cli: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<string> {
  const clean: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', ...env };
  delete clean.npm_lifecycle_event;
  delete clean.npm_config_user_agent;
  return run(process.execPath, [cli, ...args], { env: clean, timeout: 60_000 }).then(
    (result) => result.stdout,
    (error: { stdout?: string; stderr?: string; message: string }) => {
      throw new Error(
        `payhook ${args.join(' ')}: ${error.stderr ?? ''}${error.stdout ?? ''}${error.message}`,
      );
    },
  );
}

/** The sender's settings for receivers, from the JSON lines `payhook serve` printed. */
export function receiverSettings(out: string): { businessId: string; webhookSecret: string } {
  for (const line of out.split('\n')) {
    if (!line.startsWith('{')) continue;
    const entry = JSON.parse(line) as { webhookSecret?: string; businessId?: string };
    if (entry.webhookSecret && entry.businessId)
      return { businessId: entry.businessId, webhookSecret: entry.webhookSecret };
  }
  throw new Error(`payhook serve printed no receiver settings:\n${out}`);
}

/**
 * A Worker served by Miniflare (the workerd of `wrangler dev`), as a child process: the app's
 * worker.mjs bundled with esbuild for the browser platform from the app's own node_modules, its
 * settings as bindings (what `wrangler dev` takes from .dev.vars). Prints `worker on <url>` once it
 * listens, and the Worker's console lines.
 */
export const MINIFLARE_RUNNER = (esbuild: string, miniflare: string) => `
import { build } from ${JSON.stringify(esbuild)};
import { Miniflare } from ${JSON.stringify(miniflare)};
const { outputFiles } = await build({
  entryPoints: ['worker.mjs'], bundle: true, write: false, format: 'esm', platform: 'browser',
  conditions: ['workerd', 'worker', 'browser'], external: ['cloudflare:*'], logLevel: 'silent',
});
const { BUSINESS_ID, WEBHOOK_SECRET, ALLOWED_IPS, PORT } = process.env;
const mf = new Miniflare({
  modules: true, script: outputFiles[0].text, compatibilityDate: '2026-04-01',
  bindings: { BUSINESS_ID, WEBHOOK_SECRET, ALLOWED_IPS }, host: '127.0.0.1', port: Number(PORT),
});
console.log('worker on ' + (await mf.ready).href);
process.once('SIGTERM', async () => { await mf.dispose(); process.exit(0); });
`;
