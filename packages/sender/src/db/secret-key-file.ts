// The embedded sandbox's sealing key: with no PAYHOOK_SECRET_KEY, a sender on PGlite keeps one in
// a file of its data directory, readable by its owner only (mode 0600), made on the first start
// and read on every one after. It protects a copy of the database made without that file; a copy
// of the whole directory takes the key with it, which is why a deployment sets PAYHOOK_SECRET_KEY.
import { chmod, open, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { generateSecretKey, readSecretKeys, SecretKeyError, type SecretKeys } from './secret-box.js';

/** The key file's name in a PGlite data directory. */
export const SECRET_KEY_FILE = 'payhook-secret-key';

/** Where a database's sealing key came from: the file of its data directory, and whether it was made now. */
export interface SecretKeyFile {
  path: string;
  created: boolean;
}

/**
 * The keys of `dataDir`'s key file, made (mode 0600) when there is none; a file left readable by
 * others is set back to 0600.
 */
export async function dataDirSecretKeys(dataDir: string): Promise<{ keys: SecretKeys; file: SecretKeyFile }> {
  const path = join(dataDir, SECRET_KEY_FILE);
  let created = false;
  try {
    const handle = await open(path, 'wx', 0o600);
    try {
      await handle.writeFile(`${generateSecretKey()}\n`);
    } finally {
      await handle.close();
    }
    created = true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    if (((await stat(path)).mode & 0o077) !== 0) await chmod(path, 0o600);
  }
  const text = (await readFile(path, 'utf8')).trim();
  const keys = /^[^,\s]+$/.test(text) ? readKey(text) : undefined;
  if (!keys) {
    throw new SecretKeyError(
      'secret_key_invalid',
      `The key file ${path} does not hold one <key id>:<32 bytes, base64url> key. Restore it from a backup; remove it only if no secret was sealed with it.`,
    );
  }
  return { keys, file: { path, created } };
}

function readKey(text: string): SecretKeys | undefined {
  try {
    return readSecretKeys({ PAYHOOK_SECRET_KEY: text });
  } catch {
    return undefined;
  }
}
