/**
 * A command line for the user to paste, written the way this process was started: through a
 * package manager's script (`npm_lifecycle_event` and `npm_config_user_agent` set), as that script
 * (`pnpm -s payhook ...` in a clone of payhook, whose package.json has the script `payhook`);
 * through `npx` as `npx payhook ...`; otherwise as `payhook ...`. Only for lines to paste: the
 * `--help` texts describe the command as `payhook`.
 *
 * @example
 * ```ts
 * commandLine('endpoints list', { npm_lifecycle_event: 'payhook', npm_config_user_agent: 'pnpm/10.28.1 npm/? node/v20.0.0 linux x64' });
 * // 'pnpm -s payhook endpoints list'
 * commandLine('endpoints list', {}); // 'payhook endpoints list'
 * ```
 */
export function commandLine(args: string, env: Record<string, string | undefined> = process.env): string {
  const script = env.npm_lifecycle_event;
  const agent = env.npm_config_user_agent ?? '';
  if (script) {
    // `npx payhook` (npm exec) runs as the event `npx`: not a script of the project.
    if (script === 'npx' && agent.startsWith('npm/')) return `npx payhook ${args}`;
    const name = /^[\w:./@+-]+$/.test(script) ? script : `'${script.replaceAll("'", `'\\''`)}'`;
    if (agent.startsWith('pnpm/')) return `pnpm -s ${name} ${args}`;
    if (agent.startsWith('npm/')) return `npm run -s ${name} -- ${args}`;
    if (agent.startsWith('yarn/')) return `yarn -s ${name} ${args}`;
    if (agent.startsWith('bun/')) return `bun run ${name} ${args}`;
  }
  return `payhook ${args}`;
}
