// @module-tag pglite
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, openDatabase } from '../src/index.js';

// PGlite runs every statement on one thread: a new WAL segment filled with 16 MB of zeros before
// its first record held it for 6 to 47 ms, every few seconds of writes until checkpoints recycle
// old segments. The sender's PGlite makes new segments without that write:
// the file is sized, and its blocks are written as the records come.

describe('new WAL segments on PGlite', { timeout: 60_000 }, () => {
  let dir: string;
  let database: Database;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'payhook-wal-'));
    database = await openDatabase({ dataDir: join(dir, 'data') });
  }, 60_000);
  afterAll(async () => {
    await database?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('are not written full of zeros when they are made', async () => {
    const wal = join(dir, 'data', 'pg_wal');
    const segments = async () => (await readdir(wal)).filter((name) => /^[0-9A-F]{24}$/.test(name)).sort();
    const before = await segments();
    // The switch ends the segment (its rest written out); the write after it makes the next one.
    await sql`select pg_switch_wal()`.execute(database.db);
    await sql`create table wal_probe (n int)`.execute(database.db);
    await sql`insert into wal_probe values (1)`.execute(database.db);
    const made = (await segments()).filter((name) => !before.includes(name));
    expect(made).toHaveLength(1);
    const file = await stat(join(wal, made[0] as string));
    expect(file.size).toBe(16 * 1024 * 1024);
    // Blocks on disk: those of the few records written, not 16 MB of zeros.
    expect(file.blocks * 512).toBeLessThan(1024 * 1024);
  });
});
