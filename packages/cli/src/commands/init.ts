import { existsSync } from 'node:fs';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import packageJson from '../../package.json' with { type: 'json' };
import { CliError, type Command, EXIT, oneOf, parse } from '../command.js';
import {
  FRAMEWORKS,
  type Framework,
  localUrl,
  packageJsonSource,
  readmeSource,
  TEMPLATES,
} from '../init-templates.js';
import { commandLine } from '../invocation.js';

/** The clone this command was built in (dist/cli.js inside packages/cli), if it runs from one. */
function cloneRoot(): string | undefined {
  const root = resolve(fileURLToPath(new URL('../../../', import.meta.url)));
  const isClone =
    existsSync(join(root, 'pnpm-workspace.yaml')) && existsSync(join(root, 'packages/core/package.json'));
  return isClone ? root : undefined;
}

/** The tarball `pnpm pack:all` writes for a package: payhook-core.tgz for @payhook/core. */
const tarballName = (pkg: string) => `${pkg.replace(/^@/, '').replace('/', '-')}.tgz`;

/** A package name npm takes, from the directory's name. */
function appName(dir: string): string {
  const name = basename(dir)
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, '-')
    .replace(/^[._-]+/, '');
  return name || 'payhook-receiver';
}

export const init: Command = {
  name: 'init',
  summary: 'Write a ready receiver app (package.json, index.mjs, README) into a new directory',
  help: `Usage: payhook init <dir> [--framework <name>] [--tarballs <dir>]

Writes a receiver app into <dir> (new, or empty): package.json, the receiver (the quickstart of
the framework or runtime: BUSINESS_ID, WEBHOOK_SECRET and ALLOWED_IPS from the environment, a
handler per payment session event, a clean stop on Ctrl-C) and a README saying how to run it and
send it events. express, koa and fastify use their adapter (index.mjs); next (app/webhooks/route.js),
hono (index.mjs), bun and deno (index.ts) and worker (worker.mjs and wrangler.toml) the Web handler.

Run from a payhook clone (\`pnpm -s payhook init\`), the app depends on the clone's tarballs by
\`file:\` path: run \`pnpm pack:all\` in the clone first. Otherwise it depends on the published
packages.

Options:
  --framework <name>   express, koa, fastify, next, hono, bun,      default: express
                       deno or worker
  --tarballs <dir>     take @payhook/* from the tarballs in <dir>   default: the clone's ./tarballs
  -h, --help           show this help

Examples:
  pnpm -s payhook init ../my-receiver
  pnpm -s payhook init ../my-receiver --framework fastify && cd ../my-receiver && npm install && npm start`,
  async run(argv, io) {
    const { values, positionals } = parse(
      'init',
      argv,
      { framework: { type: 'string' }, tarballs: { type: 'string' } },
      1,
    );
    const [target] = positionals;
    if (target === undefined || target === '')
      throw new CliError(`<dir> is required. See: ${commandLine('init --help', io.env)}`);
    const framework: Framework = oneOf(values.framework, FRAMEWORKS, '--framework', 'express');
    const dir = resolve(target);
    if (existsSync(dir) && (await readdir(dir).catch(() => ['(not a directory)'])).length > 0) {
      throw new CliError(`${target} exists and is not an empty directory: give a new or empty one.`);
    }

    const clone = cloneRoot();
    const tarballs = values.tarballs ? resolve(values.tarballs) : clone && join(clone, 'tarballs');
    const fromTarball = (pkg: string) => {
      const file = join(tarballs as string, tarballName(pkg));
      // Relative, as npm writes it, while the app sits near the clone (a sibling directory, say).
      const near = relative(dir, file).replaceAll('\\', '/');
      return `file:${/^(\.\.\/){3}/.test(near) ? file : near}`;
    };
    const range = tarballs ? fromTarball : () => `^${packageJson.version}`;
    const name = appName(dir);
    await mkdir(dir, { recursive: true });
    const template = TEMPLATES[framework] as (typeof TEMPLATES)[string];
    await writeFile(join(dir, 'package.json'), packageJsonSource(name, framework, range));
    for (const [file, source] of Object.entries(template.files)) {
      await mkdir(dirname(join(dir, file)), { recursive: true });
      await writeFile(join(dir, file), source);
    }
    await writeFile(join(dir, 'README.md'), readmeSource(name, framework, tarballs));
    const receiverFile = Object.keys(template.files)[0];
    const settings =
      framework === 'worker'
        ? `# in .dev.vars: BUSINESS_ID=..., WEBHOOK_SECRET=whsec_..., ALLOWED_IPS=${template.localIps} (one a line; what ${commandLine('serve', io.env)} prints)`
        : `export BUSINESS_ID=... WEBHOOK_SECRET=whsec_... ALLOWED_IPS=${template.localIps}   # what ${commandLine('serve', io.env)} prints${template.localIps === "'*'" ? ', any address locally (see README.md)' : ''}`;

    const missing = tarballs && !existsSync(join(tarballs, tarballName('@payhook/core')));
    const shown = relative(process.cwd(), dir) || '.';
    io.stdout.write(
      `Wrote ${shown}/: package.json, ${receiverFile} (a receiver on ${framework}), README.md
@payhook packages: ${tarballs ? `the tarballs in ${tarballs}` : `^${packageJson.version} from the registry`}${
        missing ? `\nNo tarballs there yet: run pnpm pack:all in ${clone ?? 'the payhook clone'} first.` : ''
      }

Next:
  cd ${shown}
  npm install
  ${settings}
  ${template.start}
Then send it an event:
  ${commandLine(`trigger payment.session.succeeded --to ${localUrl(framework)} --business-id "$BUSINESS_ID" --secret "$WEBHOOK_SECRET"`, io.env)}
`,
    );
    return EXIT.ok;
  },
};
