import type { Kysely } from 'kysely';
import { createBusinessTable, createdAt, createPageIndex } from './columns.js';

/** Migration 0003_beneficiaries, shipped: what it makes must never change; add the next. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await createBusinessTable(db, 'beneficiaries')
    .addColumn('currency', 'text', (c) => c.notNull())
    // The beneficiary as the API returns it (every field of the spec's table), written once.
    .addColumn('data', 'jsonb', (c) => c.notNull())
    .$call(createdAt)
    .execute();
  await createPageIndex(db, 'beneficiaries');
}
