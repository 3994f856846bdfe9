import { type Kysely, sql } from 'kysely';
import { createBusinessTable, createdAt, createPageIndex, stampedNow, uuidKey } from './columns.js';

/** Migration 0012_webhook_endpoints, shipped: what it makes must never change; add the next. */
export async function up(db: Kysely<unknown>): Promise<void> {
  // A business's webhook destinations as objects: each with its event filter, its status and
  // its signature scheme (docs/decisions.md, "Endpoints as objects").
  await createBusinessTable(db, 'webhook_endpoints')
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('description', 'text')
    .addColumn('enabled_events', 'jsonb', (c) => c.notNull().defaultTo(sql`'["*"]'::jsonb`))
    .addColumn('status', 'text', (c) =>
      c.notNull().defaultTo('enabled').check(sql`status in ('enabled', 'disabled')`),
    )
    .addColumn('disabled_reason', 'text', (c) => c.check(sql`disabled_reason in ('manual', 'failing')`))
    .addColumn('disabled_at', 'timestamptz')
    .addColumn('signature_scheme', 'text', (c) =>
      c.notNull().defaultTo('v1').check(sql`signature_scheme in ('v1', 'v1a')`),
    )
    // Made through the settings' webhook_urls: signed with the business's own secrets.
    .addColumn('account_secrets', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('rate_limit_per_second', 'integer', (c) => c.check(sql`rate_limit_per_second > 0`))
    // The rate limit's state: no attempt to this endpoint starts before it.
    .addColumn('next_send_at', 'timestamptz')
    .$call(createdAt)
    .addColumn('updated_at', 'timestamptz', stampedNow)
    .execute();
  // Keyset pages newest first; also the fan-out's look-up of a business's endpoints.
  await createPageIndex(db, 'webhook_endpoints');
  // The secrets of endpoints that have their own: `whsec_` (v1), or `whsk_` with its `whpk_`.
  await db.schema
    .createTable('endpoint_signing_secrets')
    .$call(uuidKey)
    .addColumn('endpoint_id', 'uuid', (c) =>
      c.notNull().references('webhook_endpoints.id').onDelete('cascade'),
    )
    .addColumn('secret', 'text', (c) => c.notNull())
    .addColumn('public_key', 'text')
    .$call(createdAt)
    .addColumn('expires_at', 'timestamptz')
    .execute();
  await sql`create unique index endpoint_signing_secrets_current on endpoint_signing_secrets (endpoint_id) where expires_at is null`.execute(
    db,
  );
  await db.schema
    .createIndex('endpoint_signing_secrets_by_endpoint')
    .on('endpoint_signing_secrets')
    .columns(['endpoint_id', 'created_at desc'])
    .execute();
  // The endpoint a delivery was made for (null for deliveries older than endpoints, and for
  // a listener's): its secrets sign the attempts, its rate limit paces them.
  await db.schema.alterTable('deliveries').addColumn('endpoint_id', 'uuid').execute();
  // Every URL a business had registered becomes an endpoint that takes every event and signs
  // with the business's secrets, in the order of the list. The settings' column is left as it
  // was (an instance of the previous version still reads it) and is no longer read.
  await sql`insert into webhook_endpoints (business_id, mode, url, account_secrets, created_at, updated_at)
      select s.business_id, s.mode, u.url, true,
             s.updated_at + (u.ord * interval '1 microsecond'), s.updated_at
      from account_settings s,
           jsonb_array_elements_text(s.webhook_urls) with ordinality as u(url, ord)`.execute(db);
}
