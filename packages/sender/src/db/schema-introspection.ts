import {
  type DatabaseIntrospector,
  type DatabaseMetadata,
  type Dialect,
  type Kysely,
  type SchemaMetadata,
  sql,
  type TableMetadata,
} from 'kysely';

/**
 * What the migrator sees of the database: this sender's schema alone (`schema`, or the first on the
 * search path when none is named).
 *
 * Kysely's own PostgreSQL introspector reads every table of every schema, and calls
 * `has_schema_privilege` and `pg_get_serial_sequence` by name on each. A schema dropped by someone
 * else while that statement runs makes it fail ("schema … does not exist"), so one sender's start
 * could fail because another schema on the same server was being removed; and on a server shared by
 * many schemas, each start read all of them. The migrator only asks whether its two tables and its
 * schema exist, which this answers from the catalog of one schema.
 */
export function withSchemaIntrospection(dialect: Dialect, schema: string | undefined): Dialect {
  return {
    createAdapter: () => dialect.createAdapter(),
    createDriver: () => dialect.createDriver(),
    createQueryCompiler: () => dialect.createQueryCompiler(),
    createIntrospector: (db) => new OneSchemaIntrospector(db, schema),
  };
}

class OneSchemaIntrospector implements DatabaseIntrospector {
  readonly #db: Kysely<unknown>;
  readonly #schema: string | null;

  constructor(db: Kysely<unknown>, schema: string | undefined) {
    this.#db = db;
    this.#schema = schema ?? null;
  }

  async getSchemas(): Promise<SchemaMetadata[]> {
    const { rows } = await sql<SchemaMetadata>`
      select nspname as name from pg_catalog.pg_namespace
      where nspname = coalesce(${this.#schema}::text, current_schema())`.execute(this.#db);
    return rows;
  }

  async getTables(): Promise<TableMetadata[]> {
    const { rows } = await sql<{ name: string; schema: string; isView: boolean }>`
      select c.relname as name, n.nspname as schema, c.relkind in ('v', 'm') as "isView"
      from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
      where n.nspname = coalesce(${this.#schema}::text, current_schema())
        and c.relkind in ('r', 'p', 'v', 'm')`.execute(this.#db);
    // The migrator reads names only; the columns are left out rather than read for nothing.
    return rows.map((row) => ({ ...row, columns: [] }));
  }

  async getMetadata(): Promise<DatabaseMetadata> {
    return { tables: await this.getTables() };
  }
}
