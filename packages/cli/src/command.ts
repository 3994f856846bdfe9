import { parseArgs } from 'node:util';

/**
 * Exit codes of every command (documented in the README): 0 success; 1 the thing checked is not
 * right (a payload that does not verify, a receiver that did not answer 200, a demo event not
 * handled exactly once); 2 bad usage; 3 an operational failure (storage locked or unreachable,
 * a receiver that cannot be reached).
 */
export const EXIT = { ok: 0, failed: 1, usage: 2, error: 3 } as const;

/** An error the command line reports in one line, with its exit code. */
export class CliError extends Error {
  override readonly name = 'CliError';
  constructor(
    message: string,
    readonly exitCode: number = EXIT.usage,
  ) {
    super(message);
  }
}

/** What a command reads and writes: the process's streams, or a test's. */
export interface Io {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream;
  stdin: NodeJS.ReadableStream;
  env: Record<string, string | undefined>;
}

/** One `payhook` command. */
export interface Command {
  name: string;
  summary: string;
  /** The full `--help` text: usage, options, examples. */
  help: string;
  /** Runs the command; resolves to its exit code. */
  run(argv: string[], io: Io): Promise<number>;
}

type Options = Record<string, { type: 'string' | 'boolean'; multiple?: boolean; short?: string }>;

/** The values of parsed options: strings or booleans by type, arrays when `multiple`. */
export type Values<O extends Options> = {
  [K in keyof O]?: O[K] extends { type: 'boolean' }
    ? O[K] extends { multiple: true }
      ? boolean[]
      : boolean
    : O[K] extends { multiple: true }
      ? string[]
      : string;
};

/**
 * Parses a command's arguments strictly: an unknown flag or a missing value is a usage error that
 * names it and points at `--help`.
 */
export function parse<O extends Options>(
  command: string,
  argv: string[],
  options: O,
  positionals = 0,
): { values: Values<O>; positionals: string[] } {
  try {
    const parsed = parseArgs({
      args: argv,
      options: { ...options, help: { type: 'boolean', short: 'h' } },
      allowPositionals: positionals > 0,
      strict: true,
    });
    if (parsed.positionals.length > positionals) {
      throw new CliError(`Unexpected argument ${JSON.stringify(parsed.positionals[positionals])}.`);
    }
    return { values: parsed.values as Values<O>, positionals: parsed.positionals };
  } catch (error) {
    if (error instanceof CliError) throw error;
    throw new CliError(
      `${(error as Error).message.replace(/\. To specify.*$/s, '.')} See: payhook ${command} --help`,
    );
  }
}

/** Reads a required string option, or fails naming it. */
export function required(value: string | undefined, flag: string, command: string): string {
  if (value === undefined || value === '') {
    throw new CliError(`${flag} is required. See: payhook ${command} --help`);
  }
  return value;
}

/** Reads one of a set of values, or fails listing them. */
export function oneOf<T extends string>(
  value: string | undefined,
  allowed: readonly T[],
  flag: string,
  fallback: T,
): T {
  if (value === undefined) return fallback;
  if (!allowed.includes(value as T)) {
    throw new CliError(`${flag} must be one of ${allowed.join(', ')}, not ${JSON.stringify(value)}.`);
  }
  return value as T;
}

/** Reads all of standard input as text. */
export async function readStdin(io: Io): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of io.stdin)
    chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string));
  return Buffer.concat(chunks).toString('utf8');
}

/** Writes a value as one line of JSON (the `--json` output). */
export function printJson(io: Io, value: unknown): void {
  io.stdout.write(`${JSON.stringify(value)}\n`);
}

/** ANSI colour when writing to a terminal (and `NO_COLOR` unset), plain text otherwise. */
export function painter(io: Io) {
  const on = Boolean(io.stdout.isTTY) && !io.env.NO_COLOR;
  const paint = (code: number) => (s: string) => (on ? `\x1b[${code}m${s}\x1b[0m` : s);
  return { on, green: paint(32), red: paint(31), yellow: paint(33), dim: paint(2), bold: paint(1) };
}
