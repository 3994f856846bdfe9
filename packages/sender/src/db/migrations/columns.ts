import { type ColumnDefinitionBuilder, type CreateTableBuilder, type Kysely, sql } from 'kysely';

// The columns and the index that the sender's tables share, for the migrations to build them
// from. Shipped migrations call these, and a shipped migration must make the same schema forever
// (the databases it ran on keep what it made then; test/migrated-schema.test.ts compares): never
// change what one of them makes. A table that needs something else says it itself, or a new
// helper beside these does.

/** A `timestamptz` column's definition: not null, defaulting to the time of the row's statement. */
export const stampedNow = (column: ColumnDefinitionBuilder): ColumnDefinitionBuilder =>
  column.notNull().defaultTo(sql`clock_timestamp()`);

/** `id uuid primary key default gen_random_uuid()`. */
export function uuidKey<TB extends string, C extends string>(
  table: CreateTableBuilder<TB, C>,
): CreateTableBuilder<TB, C | 'id'> {
  return table.addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`));
}

/** The row's owner: `business_id text not null`, `mode text not null check (mode in ('test', 'live'))`. */
export function businessAndMode<TB extends string, C extends string>(
  table: CreateTableBuilder<TB, C>,
): CreateTableBuilder<TB, C | 'business_id' | 'mode'> {
  return table
    .addColumn('business_id', 'text', (c) => c.notNull())
    .addColumn('mode', 'text', (c) => c.notNull().check(sql`mode in ('test', 'live')`));
}

/** {@link businessAndMode} without the check on `mode`, as `events`, `idempotency_keys` and `dashboard_sessions` have it. */
export function businessAndUncheckedMode<TB extends string, C extends string>(
  table: CreateTableBuilder<TB, C>,
): CreateTableBuilder<TB, C | 'business_id' | 'mode'> {
  return table
    .addColumn('business_id', 'text', (c) => c.notNull())
    .addColumn('mode', 'text', (c) => c.notNull());
}

/** `created_at timestamptz not null default clock_timestamp()` ({@link stampedNow}). */
export function createdAt<TB extends string, C extends string>(
  table: CreateTableBuilder<TB, C>,
): CreateTableBuilder<TB, C | 'created_at'> {
  return table.addColumn('created_at', 'timestamptz', stampedNow);
}

/**
 * A table of one business's resources in one mode, from its first columns: {@link uuidKey}, then
 * {@link businessAndMode}.
 */
export function createBusinessTable<TB extends string>(
  db: Kysely<unknown>,
  name: TB,
): CreateTableBuilder<TB, 'id' | 'business_id' | 'mode'> {
  return db.schema.createTable(name).$call(uuidKey).$call(businessAndMode);
}

/**
 * Creates `<table>_page`, the index of keyset pages newest first within one business and mode:
 * `(business_id, mode, created_at desc, id desc)`.
 */
export async function createPageIndex(db: Kysely<unknown>, table: string): Promise<void> {
  await db.schema
    .createIndex(`${table}_page`)
    .on(table)
    .columns(['business_id', 'mode', 'created_at desc', 'id desc'])
    .execute();
}
