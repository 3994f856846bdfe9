import { type Kysely, sql } from 'kysely';

/** An index built beside the migrations (see {@link buildOnlineIndexes}). */
export interface OnlineIndex {
  name: string;
  table: string;
  /** What follows `on <table>`: the columns, and the predicate of a partial index. */
  definition: string;
  /** What reads it. */
  for: string;
  /**
   * A statement run before the index is built, each time it is missing: it marks the rows that a
   * migration's new column could not mark in the migration's transaction (which would stop every
   * write to the table while it read a provider's history). It must be safe to run again.
   */
  fill?: string;
}

/**
 * The indexes added after the first release on the tables that delivery and the API write. Never edit one
 * that has shipped (a database that has it keeps it as it was): add another under a new name.
 */
export const ONLINE_INDEXES: readonly OnlineIndex[] = [
  {
    name: 'events_payment',
    table: 'events',
    definition: '(payment_id, created_at desc, id desc) where payment_id is not null',
    for: 'GET /events?payment_id=, newest first',
  },
  {
    name: 'events_created',
    table: 'events',
    definition: '(created_at)',
    for: 'retention: the oldest events first',
  },
  {
    name: 'payments_expiring',
    table: 'payments',
    definition: "(expires_at) where status = 'pending'",
    for: 'the sweeper that expires unpaid sessions',
  },
  {
    name: 'deliveries_endpoint_pending',
    table: 'deliveries',
    definition: "(endpoint_id, id) where status = 'pending'",
    for: "an endpoint's pending deliveries: its health, its deletion, recover's held ones",
  },
  {
    name: 'deliveries_endpoint_failed',
    table: 'deliveries',
    definition: "(endpoint_id, created_at, id) where status = 'failed' and superseded_by is null",
    for: "recover: an endpoint's failures not sent again yet",
  },
  {
    name: 'idempotency_keys_created',
    table: 'idempotency_keys',
    definition: '(created_at)',
    for: 'the removal of keys past their 48 hours',
  },
  {
    name: 'endpoint_attempt_hours_hour',
    table: 'endpoint_attempt_hours',
    definition: '(hour)',
    for: 'retention of the hourly counts',
  },
  {
    name: 'events_no_webhook',
    table: 'events',
    definition: '(business_id, mode, created_at desc, id desc) where no_webhook',
    for: 'GET /events?delivery_status=none, newest first',
    // The events written before migration 0016 with no delivery to a webhook URL (`cli:` is a
    // listener's destination, delivery/destination.ts, written out here as a migration would:
    // what has shipped never changes). Those written since are marked as they are written.
    fill: `update events e set no_webhook = true where not e.no_webhook
      and not exists (select from deliveries d where d.event_id = e.id and d.url not like 'cli:%')`,
  },
  {
    name: 'events_failed_delivery',
    table: 'events',
    definition: '(business_id, mode, created_at desc, id desc) where failed_delivery',
    for: 'GET /events?delivery_status=failed, newest first',
    // The events written before migration 0016 with a failure not sent again, read through the
    // index of such deliveries (deliveries_failed).
    fill: `update events e set failed_delivery = true where not e.failed_delivery
      and e.id = any(array(select d.event_id from deliveries d
        where d.status = 'failed' and d.superseded_by is null and d.url not like 'cli:%'))`,
  },
];

/** Below this size a table's index is built in one statement: it takes a moment either way. */
const SMALL_TABLE_BYTES = 8 * 1024 * 1024;

/**
 * Builds each of {@link ONLINE_INDEXES} that the database lacks, after the migrations and under
 * their lock. Kysely runs the migrations in one transaction, where PostgreSQL cannot build an
 * index `concurrently`, and a plain `create index` on a table of millions of rows would stop
 * every write to it (each session's event, each recorded attempt) for as long as the build
 * takes. So on PostgreSQL an index on a table past a few megabytes is built concurrently: writes
 * go on, and a build that was interrupted (its index left invalid) is dropped and built again at
 * the next start. A small table's index, and every index on PGlite (one process, no concurrent
 * writer), is built in one statement. An index with a `fill` runs it first, in a statement of its
 * own: the index's existence says the rows were marked. Returns the names of the indexes it built.
 *
 * @example
 * ```ts
 * const built = await buildOnlineIndexes(migrationDb, 'postgres', 'payhook');
 * ```
 */
export async function buildOnlineIndexes(
  db: Kysely<unknown>,
  kind: 'pglite' | 'postgres',
  schema: string | undefined,
  indexes: readonly OnlineIndex[] = ONLINE_INDEXES,
): Promise<string[]> {
  const built: string[] = [];
  const namespace = sql`coalesce(${schema ?? null}::text, current_schema())`;
  for (const index of indexes) {
    const { rows } = await sql<{ valid: boolean }>`select i.indisvalid as valid
      from pg_catalog.pg_class c
      join pg_catalog.pg_namespace n on n.oid = c.relnamespace
      join pg_catalog.pg_index i on i.indexrelid = c.oid
      where c.relname = ${index.name} and n.nspname = ${namespace}`.execute(db);
    if (rows[0]?.valid) continue;
    if (index.fill !== undefined) await sql.raw(index.fill).execute(db);
    const create = (how: string) =>
      sql.raw(`create index ${how} ${index.name} on ${index.table} ${index.definition}`).execute(db);
    if (kind === 'pglite') {
      await create('if not exists');
    } else {
      if (rows[0]) await sql.raw(`drop index concurrently if exists ${index.name}`).execute(db);
      const { rows: size } = await sql<{ bytes: string }>`select pg_total_relation_size(c.oid)::text as bytes
        from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
        where c.relname = ${index.table} and n.nspname = ${namespace}`.execute(db);
      await create(Number(size[0]?.bytes ?? 0) < SMALL_TABLE_BYTES ? '' : 'concurrently');
    }
    built.push(index.name);
  }
  return built;
}
