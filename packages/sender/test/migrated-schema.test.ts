// @module-tag postgres
// @module-tag pglite
import { type Kysely, sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import type { Schema } from '../src/db/schema.js';
import { openTestDatabase, type TestStorage, testStorages } from './fixtures/storage.js';

// The schema the migrations make (with the indexes built beside them), read from the catalog and
// compared with fixtures/migrated-schema.txt: a shipped migration must make the same tables,
// columns, constraints, indexes and triggers forever, however its source is rewritten, since the
// databases it already ran on keep what it made then. The file changes only with a new
// migration (or a new index beside them): add it, then regenerate the file with
// `npx vitest run packages/sender/test/migrated-schema.test.ts -u` and review its diff, which
// should show what the new migration adds and nothing else.

/** The catalog of the current schema, one line each, in a stable order; names unqualified. */
async function describeSchema(db: Kysely<Schema>): Promise<string> {
  const lines: string[] = [];
  const tables = await sql<{ name: string }>`
    select relname as name from pg_class
    where relnamespace = current_schema()::regnamespace and relkind = 'r' and relname not like 'kysely\\_%'
    order by relname`.execute(db);
  for (const { name } of tables.rows) {
    lines.push(`table ${name}`);
    const columns = await sql<{ line: string }>`
      select a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
             || case when a.attnotnull then ' not null' else '' end
             || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '') as line
      from pg_attribute a left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
      where a.attrelid = ${name}::regclass and a.attnum > 0 and not a.attisdropped
      order by a.attnum`.execute(db);
    for (const { line } of columns.rows) lines.push(`  ${line}`);
    const constraints = await sql<{ line: string }>`
      select 'constraint ' || conname || ' ' || pg_get_constraintdef(oid) as line
      from pg_constraint where conrelid = ${name}::regclass and contype <> 'n' order by conname`.execute(db);
    const indexes = await sql<{ line: string }>`
      select 'index ' || indexname || ' ' || replace(indexdef, current_schema() || '.', '') as line
      from pg_indexes where schemaname = current_schema() and tablename = ${name}
      order by indexname`.execute(db);
    const triggers = await sql<{ line: string }>`
      select 'trigger ' || tgname || ' ' || replace(pg_get_triggerdef(oid), current_schema() || '.', '') as line
      from pg_trigger where tgrelid = ${name}::regclass and not tgisinternal order by tgname`.execute(db);
    for (const { line } of [...constraints.rows, ...indexes.rows, ...triggers.rows]) lines.push(`  ${line}`);
  }
  const functions = await sql<{ name: string; body: string }>`
    select proname as name, prosrc as body from pg_proc
    where pronamespace = current_schema()::regnamespace order by proname`.execute(db);
  for (const { name, body } of functions.rows) lines.push(`function ${name}`, body.trimEnd());
  return `${lines.join('\n')}\n`;
}

describe.each(testStorages())('the migrated schema on %s', (storage: TestStorage) => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups) await cleanup();
  });

  it('is the one the shipped migrations made', { timeout: 60_000 }, async () => {
    const { database, cleanup } = await openTestDatabase(storage, 'migrated_schema');
    cleanups.push(cleanup);
    await expect(await describeSchema(database.db)).toMatchFileSnapshot('./fixtures/migrated-schema.txt');
  });
});
