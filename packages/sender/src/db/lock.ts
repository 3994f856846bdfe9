import { open, readFile, unlink } from 'node:fs/promises';

/** The error of a data directory that another live process holds. */
export class DataDirLockedError extends Error {
  override readonly name = 'DataDirLockedError';
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    super(
      `The data directory ${dataDir} is in use by process ${pid}. Stop that process, or give this one another PAYHOOK_DATA_DIR (or a DATABASE_URL to share a PostgreSQL server).`,
    );
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Takes the lock of a PGlite data directory: a file beside it holding the owner's pid. PGlite
 * is single-process, so a second process is refused with a clear message; a lock left by a
 * process that died (kill -9) is stale and taken over. Returns the release function.
 */
export async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  const lockFile = `${dataDir.replace(/\/+$/, '')}.lock`;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const handle = await open(lockFile, 'wx');
      await handle.writeFile(String(process.pid));
      await handle.close();
      return async () => {
        await unlink(lockFile).catch(() => {});
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const pid = Number((await readFile(lockFile, 'utf8').catch(() => '')).trim());
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && alive(pid)) {
        throw new DataDirLockedError(dataDir, pid);
      }
      // Stale (its process is gone) or unreadable: remove it and try again; of two processes
      // doing this at once, the exclusive create lets one win.
      await unlink(lockFile).catch(() => {});
    }
  }
  throw new Error(`Could not take the lock of ${dataDir}.`);
}
