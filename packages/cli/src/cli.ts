import packageJson from '../package.json' with { type: 'json' };
import { CliError, type Command, closest, EXIT, type Io } from './command.js';
import { check } from './commands/check.js';
import { demo } from './commands/demo.js';
import { endpoints } from './commands/endpoints.js';
import { init } from './commands/init.js';
import { keys } from './commands/keys.js';
import { listen } from './commands/listen.js';
import { rotate } from './commands/rotate.js';
import { serve } from './commands/serve.js';
import { sign } from './commands/sign.js';
import { trigger } from './commands/trigger.js';
import { verify } from './commands/verify.js';
import { commandLine } from './invocation.js';

const COMMANDS: Command[] = [
  demo,
  init,
  serve,
  endpoints,
  rotate,
  trigger,
  listen,
  check,
  sign,
  verify,
  keys,
];

const HELP = `payhook: the webhook toolkit of the payment collection and payouts service

Usage: payhook <command> [options]

Commands:
${COMMANDS.map((c) => `  ${c.name.padEnd(9)} ${c.summary}`).join('\n')}

Run \`payhook <command> --help\` for a command's options and examples.

Exit codes: 0 success; 1 the thing checked is not right or was refused (a payload that does not
verify, a receiver that did not answer 200, a demo event not handled exactly once, a sender that
refused the request or the API key); 2 bad usage; 3 an operational failure (storage locked or
unreachable, a sender or receiver that cannot be reached, a port in use).`;

/** Runs the command line with `argv` (without node and the script); resolves to the exit code. */
export async function main(argv: string[], io: Io): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    io.stdout.write(`${HELP}\n`);
    return name === undefined ? EXIT.usage : EXIT.ok;
  }
  if (name === '--version' || name === '-v') {
    io.stdout.write(`${packageJson.version}\n`);
    return EXIT.ok;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (!command) {
    const suggestion = closest(
      name,
      COMMANDS.map((c) => c.name),
    );
    io.stderr.write(
      `payhook: unknown command ${JSON.stringify(name)}.${suggestion ? ` Did you mean ${suggestion}?` : ''} Run \`${commandLine('--help', io.env)}\` for the list.\n`,
    );
    return EXIT.usage;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    io.stdout.write(`${command.help}\n`);
    return EXIT.ok;
  }
  try {
    return await command.run(rest, io);
  } catch (error) {
    if (error instanceof CliError) {
      io.stderr.write(`payhook ${name}: ${error.message}\n`);
      return error.exitCode;
    }
    io.stderr.write(`payhook ${name}: ${(error as Error).stack ?? String(error)}\n`);
    return EXIT.error;
  }
}

main(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  stdin: process.stdin,
  env: process.env,
}).then(
  // Exit once the output is written: a demo or a server leaves no handle that should keep it alive.
  (code) => process.stdout.write('', () => process.exit(code)),
);
