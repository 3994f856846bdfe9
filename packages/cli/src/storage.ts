import type { Database } from '@payhook/sender';
import { CliError, EXIT, type Values } from './command.js';

/** Where a command's sender data lives: `--database-url`, or a PGlite `--data-dir`. */
export const storageOptions = {
  'data-dir': { type: 'string' },
  'database-url': { type: 'string' },
} as const;

/** The values of {@link storageOptions}. */
export type StorageFlags = Values<typeof storageOptions>;

/** Opens the sender's database for a command; a locked directory or an unreachable server exits 3. */
export async function openStorage(
  flags: StorageFlags,
  env: Record<string, string | undefined>,
  /**
   * The sender's configuration (`serve`): how long a request waits on the database before a 503
   * (either storage), and on PostgreSQL the statement timeout and how many connections the API
   * shares.
   */
  serving?: { acquireTimeoutMs: number; statementTimeoutMs: number; poolSize: number },
): Promise<Database> {
  if (flags['data-dir'] !== undefined && flags['database-url'] !== undefined) {
    throw new CliError('Give --data-dir or --database-url, not both.');
  }
  const url =
    flags['database-url'] ?? (flags['data-dir'] === undefined ? env.DATABASE_URL || undefined : undefined);
  // Loaded on use: the commands that open no storage start without the sender's package.
  const { DataDirLockedError, openDatabase, readSecretKeys, SecretKeyError } = await import(
    '@payhook/sender'
  );
  try {
    // The key that seals the signing secrets (PAYHOOK_SECRET_KEY), from this command's environment.
    const secretKeys = readSecretKeys(env);
    return await openDatabase(
      url
        ? { url, ...serving, secretKeys }
        : {
            dataDir: flags['data-dir'] ?? env.PAYHOOK_DATA_DIR ?? './.payhook',
            ...(serving && { acquireTimeoutMs: serving.acquireTimeoutMs }),
            secretKeys,
          },
    );
  } catch (error) {
    // A key that is missing, malformed or wrong: the configuration, like a bad flag (exit 2).
    if (error instanceof SecretKeyError) throw new CliError(`${error.message} (${error.code})`);
    if (error instanceof DataDirLockedError) {
      throw new CliError(
        `${error.message} Stop the running sender first, or run it on PostgreSQL (--database-url) to share the data.`,
        EXIT.error,
      );
    }
    throw new CliError(`Cannot open the sender's storage: ${(error as Error).message}`, EXIT.error);
  }
}
