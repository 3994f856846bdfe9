import { parseArgs } from 'node:util';
import {
  parseSigningPublicKey,
  parseSigningSecret,
  type SigningKey,
  type SigningPublicKey,
} from '@payhook/core';
import { commandLine } from './invocation.js';

/**
 * Exit codes of every command (documented in the README): 0 success; 1 the thing checked is not
 * right or was refused (a payload that does not verify, a receiver that did not answer 200, a demo
 * event not handled exactly once, a sender that refused the request or the API key); 2 bad usage
 * (what was typed: a flag, a value, a missing argument; caught before anything is asked of a
 * sender); 3 an operational failure (storage locked or unreachable, a sender or receiver that
 * cannot be reached, a port in use).
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
    const message = (error as Error).message.replace(/\. To specify.*$/s, '').replace(/\.?$/, '.');
    const unknown = /^Unknown option '(--[^']+)'/.exec(message)?.[1];
    const suggestion = unknown && closest(unknown, [...Object.keys(options).map((o) => `--${o}`), '--help']);
    throw new CliError(
      `${message}${suggestion ? ` Did you mean ${suggestion}?` : ''} See: ${commandLine(`${command} --help`)}`,
    );
  }
}

/**
 * The candidate nearest to `input` by edit distance, if it is near enough to be a typo (at most a
 * third of its length, and 3, away); undefined otherwise.
 */
export function closest(input: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.min(3, Math.floor(input.length / 3));
  for (const candidate of candidates) {
    const d = editDistance(input, candidate);
    if (d <= bestDistance && (best === undefined || d < editDistance(input, best))) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

/** Levenshtein distance: insertions, deletions and substitutions. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      current[j] = Math.min(
        (previous[j] as number) + 1,
        (current[j - 1] as number) + 1,
        (previous[j - 1] as number) + cost,
      );
    }
    previous = current;
  }
  return previous[b.length] as number;
}

/** Reads a required string option, or fails naming it. */
export function required(value: string | undefined, flag: string, command: string): string {
  if (value === undefined || value === '') {
    throw new CliError(`${flag} is required. See: ${commandLine(`${command} --help`)}`);
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

/**
 * What to say on stderr before reading standard input: the command would otherwise seem to hang
 * when run in a terminal with nothing piped in. Nothing when standard input is a pipe or a file.
 * `env` is the command's environment (see {@link commandLine}).
 */
export function stdinPrompt(
  stdinIsTTY: boolean | undefined,
  command: string,
  waitingFor: string,
  env: Io['env'],
): string {
  if (!stdinIsTTY) return '';
  return `Reading ${waitingFor} from standard input; end it with Ctrl-D, or see: ${commandLine(`${command} --help`, env)}\n`;
}

/** Reads all of standard input as text, first saying what it awaits when it is a terminal. */
export async function readStdin(io: Io, command: string, waitingFor: string): Promise<string> {
  io.stderr.write(stdinPrompt((io.stdin as { isTTY?: boolean }).isTTY, command, waitingFor, io.env));
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

/** Reads `--secret` values into signing keys, or fails saying what is wrong (never echoing a secret). */
export function signingKeys(secrets: readonly string[]): SigningKey[] {
  return parseEach(secrets, '--secret', parseSigningSecret);
}

/** The `--public-key` values read as Ed25519 public keys, or a usage error naming the bad one. */
export function signingPublicKeys(keys: readonly string[]): SigningPublicKey[] {
  return parseEach(keys, '--public-key', parseSigningPublicKey);
}

function parseEach<T>(values: readonly string[], flag: string, read: (value: string) => T): T[] {
  return values.map((value, index) => {
    try {
      return read(value);
    } catch (error) {
      throw new CliError(`${flag}${values.length > 1 ? ` #${index + 1}` : ''}: ${(error as Error).message}`);
    }
  });
}
