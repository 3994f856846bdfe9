import type { Kysely } from 'kysely';

/** Migration 0013_endpoint_failures, shipped: what it makes must never change; add the next. */
export async function up(db: Kysely<unknown>): Promise<void> {
  // An endpoint's current run of failed attempts, kept by the attempt-record statement: a row
  // only while every attempt since `failing_since` failed (a delivered attempt deletes it).
  // The sweeper warns at 50, 75 and 90 % of the period (`warned`, the highest logged) and
  // disables the endpoint at its end (docs/decisions.md, "A run of failures is kept by the
  // attempt-record statement"). No foreign key: the record statement must never fail on an
  // endpoint deleted meanwhile; the sweeper forgets the runs of endpoints that are gone.
  await db.schema
    .createTable('endpoint_failures')
    .addColumn('endpoint_id', 'uuid', (c) => c.primaryKey())
    .addColumn('failing_since', 'timestamptz', (c) => c.notNull())
    .addColumn('last_failure_at', 'timestamptz', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull())
    .addColumn('warned', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
}
