import type { Kysely } from 'kysely';
import { createBusinessTable, createdAt, createPageIndex } from './columns.js';

/** Migration 0002_customers, shipped: what it makes must never change; add the next. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await createBusinessTable(db, 'customers')
    .addColumn('first_name', 'text', (c) => c.notNull())
    .addColumn('last_name', 'text', (c) => c.notNull())
    .addColumn('email', 'text', (c) => c.notNull())
    .addColumn('phone_number', 'text', (c) => c.notNull())
    .addColumn('billing_address', 'jsonb', (c) => c.notNull())
    .$call(createdAt)
    .execute();
  // Keyset pagination, newest first, within one business and mode.
  await createPageIndex(db, 'customers');
}
