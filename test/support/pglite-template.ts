import { createHash, randomUUID } from 'node:crypto';
import { cp, mkdir, readdir, readFile, rename, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openDatabase } from '@payhook/sender';

// A new PGlite database costs seconds of CPU: PostgreSQL's initdb runs in WebAssembly, then the
// migrations. Tests that need a fresh, empty sender database on PGlite start from a copy of one
// made once and cached under node_modules/.cache, keyed by PGlite's version and the migrations'
// source, so a schema change makes a new one. A copy is an ordinary, cleanly shut down data
// directory: PGlite opens it as it opens any existing database (what `payhook serve` does on
// every start after the first). The tests of a first start itself (initdb, the migrations from
// nothing, `payhook serve`'s first-start messages) keep starting from an empty directory.

const root = fileURLToPath(new URL('../..', import.meta.url));
const cacheDir = join(root, 'node_modules/.cache/payhook-tests');
const db = join(root, 'packages/sender/src/db');

let template: Promise<string> | undefined;

async function templateKey(): Promise<string> {
  const require = createRequire(join(root, 'packages/sender/package.json'));
  const pglite = JSON.parse(
    await readFile(join(dirname(require.resolve('@electric-sql/pglite')), '../package.json'), 'utf8'),
  ) as { version: string };
  // What makes the schema: the migrations (one file each, their helpers and their list) and the
  // indexes built beside them.
  const sources = [
    join(db, 'migrations.ts'),
    join(db, 'online-indexes.ts'),
    ...(await readdir(join(db, 'migrations'))).sort().map((file) => join(db, 'migrations', file)),
  ];
  const hash = createHash('sha256').update(pglite.version);
  for (const source of sources) hash.update(await readFile(source));
  return hash.digest('hex').slice(0, 16);
}

async function makeTemplate(): Promise<string> {
  const dir = join(cacheDir, `pglite-${await templateKey()}`);
  try {
    await readFile(join(dir, 'PG_VERSION'));
    return dir;
  } catch {
    // Not made yet: made below.
  }
  await mkdir(cacheDir, { recursive: true });
  const scratch = join(cacheDir, `making-${randomUUID()}`);
  const database = await openDatabase({ dataDir: join(scratch, 'data') });
  await database.close();
  // Another worker may have made it meanwhile: the first rename wins, the other copy goes.
  await rename(join(scratch, 'data'), dir).catch(() => undefined);
  await rm(scratch, { recursive: true, force: true });
  await readFile(join(dir, 'PG_VERSION'));
  return dir;
}

/**
 * Fills `dataDir` (which must not exist yet) with a new, migrated, empty sender database on
 * PGlite: what `openDatabase({ dataDir })` makes on a first start, in a fraction of its time.
 */
export async function copyPgliteTemplate(dataDir: string): Promise<void> {
  template ??= makeTemplate();
  await cp(await template, dataDir, { recursive: true, errorOnExist: true, force: false });
}
