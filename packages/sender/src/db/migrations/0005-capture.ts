import { type Kysely, sql } from 'kysely';

/** Migration 0005_capture, shipped: what it makes must never change; add the next. */
export async function up(db: Kysely<unknown>): Promise<void> {
  // Capture keeps the payment pending (the spec) and attaches the method's links or account.
  await db.schema
    .alterTable('payments')
    .addColumn('captured_at', 'timestamptz')
    .addColumn('auth_type', 'text')
    .addColumn('links', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .execute();
}
