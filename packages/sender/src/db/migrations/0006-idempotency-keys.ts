import type { Kysely } from 'kysely';
import { businessAndUncheckedMode, createdAt } from './columns.js';

/** Migration 0006_idempotency_keys, shipped: what it makes must never change; add the next. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('idempotency_keys')
    .$call(businessAndUncheckedMode)
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('request_hash', 'text', (c) => c.notNull())
    .addColumn('response_status', 'integer')
    .addColumn('response_body', 'text')
    .$call(createdAt)
    .addPrimaryKeyConstraint('idempotency_keys_pk', ['business_id', 'mode', 'key'])
    .execute();
}
