import { type Kysely, type Migration, sql } from 'kysely';

// The migrations of the sender's first releases (0001 to 0013), as they shipped: never edit one,
// add the next in its own file (`../migrations.ts` lists them all).
export const initialMigrations: Record<string, Migration> = {
  '0001_keys_and_settings': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('api_keys')
        .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
        .addColumn('business_id', 'text', (c) => c.notNull())
        .addColumn('mode', 'text', (c) => c.notNull().check(sql`mode in ('test', 'live')`))
        .addColumn('key_hash', 'text', (c) => c.notNull().unique())
        .addColumn('key_prefix', 'text', (c) => c.notNull())
        .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
        .execute();
      await db.schema
        .createTable('account_settings')
        .addColumn('business_id', 'text', (c) => c.notNull())
        .addColumn('mode', 'text', (c) => c.notNull().check(sql`mode in ('test', 'live')`))
        .addColumn('require_mfa', 'boolean', (c) => c.notNull().defaultTo(false))
        .addColumn('webhook_urls', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
        .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
        .addPrimaryKeyConstraint('account_settings_pk', ['business_id', 'mode'])
        .execute();
    },
  },
  '0002_customers': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('customers')
        .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
        .addColumn('business_id', 'text', (c) => c.notNull())
        .addColumn('mode', 'text', (c) => c.notNull().check(sql`mode in ('test', 'live')`))
        .addColumn('first_name', 'text', (c) => c.notNull())
        .addColumn('last_name', 'text', (c) => c.notNull())
        .addColumn('email', 'text', (c) => c.notNull())
        .addColumn('phone_number', 'text', (c) => c.notNull())
        .addColumn('billing_address', 'jsonb', (c) => c.notNull())
        .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
        .execute();
      // Keyset pagination, newest first, within one business and mode.
      await db.schema
        .createIndex('customers_page')
        .on('customers')
        .columns(['business_id', 'mode', 'created_at desc', 'id desc'])
        .execute();
    },
  },
  '0003_beneficiaries': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('beneficiaries')
        .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
        .addColumn('business_id', 'text', (c) => c.notNull())
        .addColumn('mode', 'text', (c) => c.notNull().check(sql`mode in ('test', 'live')`))
        .addColumn('currency', 'text', (c) => c.notNull())
        // The beneficiary as the API returns it (every field of the spec's table), written once.
        .addColumn('data', 'jsonb', (c) => c.notNull())
        .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
        .execute();
      await db.schema
        .createIndex('beneficiaries_page')
        .on('beneficiaries')
        .columns(['business_id', 'mode', 'created_at desc', 'id desc'])
        .execute();
    },
  },
  '0004_payments_and_outbox': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('payments')
        .addColumn('id', 'uuid', (c) => c.primaryKey())
        .addColumn('business_id', 'text', (c) => c.notNull())
        .addColumn('mode', 'text', (c) => c.notNull().check(sql`mode in ('test', 'live')`))
        .addColumn('reference', 'text', (c) => c.notNull())
        .addColumn('status', 'text', (c) =>
          c.notNull().check(sql`status in ('pending', 'captured', 'settled', 'failed')`),
        )
        .addColumn('method_type', 'text')
        // The payment object as the API returns it, kept whole so that responses and events agree.
        .addColumn('data', 'jsonb', (c) => c.notNull())
        .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
        .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
        .addUniqueConstraint('payments_reference', ['business_id', 'mode', 'reference'])
        .execute();
      await db.schema
        .createIndex('payments_page')
        .on('payments')
        .columns(['business_id', 'mode', 'created_at desc', 'id desc'])
        .execute();
      // The transactional outbox: an event and one delivery per registered URL, written in the
      // transaction of the state change; the delivery worker only reads them.
      await db.schema
        .createTable('events')
        .addColumn('id', 'uuid', (c) => c.primaryKey())
        .addColumn('business_id', 'text', (c) => c.notNull())
        .addColumn('mode', 'text', (c) => c.notNull())
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('payment_id', 'uuid', (c) => c.references('payments.id'))
        // The exact bytes every attempt sends: {"event","data","checksum"}, signed once.
        .addColumn('payload', 'text', (c) => c.notNull())
        .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
        .execute();
      await db.schema
        .createIndex('events_page')
        .on('events')
        .columns(['business_id', 'mode', 'created_at desc', 'id desc'])
        .execute();
      await db.schema
        .createTable('deliveries')
        .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
        .addColumn('event_id', 'uuid', (c) => c.notNull().references('events.id'))
        .addColumn('url', 'text', (c) => c.notNull())
        .addColumn('status', 'text', (c) =>
          c.notNull().defaultTo('pending').check(sql`status in ('pending', 'delivered', 'failed')`),
        )
        .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('next_attempt_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
        .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
        .execute();
      await db.schema
        .createIndex('deliveries_due')
        .on('deliveries')
        .columns(['next_attempt_at'])
        .where(sql.ref('status'), '=', 'pending')
        .execute();
    },
  },
  '0005_capture': {
    async up(db: Kysely<unknown>) {
      // Capture keeps the payment pending (the spec) and attaches the method's links or account.
      await db.schema
        .alterTable('payments')
        .addColumn('captured_at', 'timestamptz')
        .addColumn('auth_type', 'text')
        .addColumn('links', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
        .execute();
    },
  },
  '0006_idempotency_keys': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('idempotency_keys')
        .addColumn('business_id', 'text', (c) => c.notNull())
        .addColumn('mode', 'text', (c) => c.notNull())
        .addColumn('key', 'text', (c) => c.notNull())
        .addColumn('request_hash', 'text', (c) => c.notNull())
        .addColumn('response_status', 'integer')
        .addColumn('response_body', 'text')
        .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
        .addPrimaryKeyConstraint('idempotency_keys_pk', ['business_id', 'mode', 'key'])
        .execute();
    },
  },
  '0007_delivery': {
    async up(db: Kysely<unknown>) {
      // The delivery worker's state. A claim moves `next_attempt_at` to the end of its lease, so
      // the due index alone finds work and a killed worker's claims come back when it passes;
      // `claim_token` lets only the current holder record the attempt.
      await db.schema
        .alterTable('deliveries')
        .addColumn('claim_token', 'uuid')
        .addColumn('first_attempt_at', 'timestamptz')
        .addColumn('last_attempt_at', 'timestamptz')
        .addColumn('finished_at', 'timestamptz')
        .addColumn('last_status_code', 'integer')
        .addColumn('last_error', 'text')
        // A failed delivery that a redelivery replaced: bulk redelivery skips it.
        .addColumn('superseded_by', 'uuid')
        .execute();
      await db.schema.createIndex('deliveries_event').on('deliveries').column('event_id').execute();
      await db.schema
        .createIndex('deliveries_failed')
        .on('deliveries')
        .column('event_id')
        .where(sql.ref('status'), '=', 'failed')
        .execute();
      await db.schema
        .createTable('delivery_attempts')
        .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
        .addColumn('delivery_id', 'uuid', (c) => c.notNull().references('deliveries.id'))
        .addColumn('attempt', 'integer', (c) => c.notNull())
        .addColumn('url', 'text', (c) => c.notNull())
        .addColumn('started_at', 'timestamptz', (c) => c.notNull())
        .addColumn('latency_ms', 'integer', (c) => c.notNull())
        .addColumn('status_code', 'integer')
        .addColumn('response_body', 'text')
        .addColumn('error_code', 'text')
        .addColumn('error_message', 'text')
        .addUniqueConstraint('delivery_attempts_number', ['delivery_id', 'attempt'])
        .execute();
      await db.schema
        .createIndex('events_type')
        .on('events')
        .columns(['business_id', 'mode', 'type'])
        .execute();
    },
  },
  '0008_attempt_key': {
    async up(db: Kysely<unknown>) {
      // An attempt is known by its delivery and number: that unique pair becomes the primary key,
      // and the random uuid key, which every recorded attempt paid for with an index entry, goes.
      await sql`alter table delivery_attempts drop constraint delivery_attempts_pkey`.execute(db);
      await sql`alter table delivery_attempts drop column id`.execute(db);
      await sql`alter table delivery_attempts drop constraint delivery_attempts_number`.execute(db);
      await sql`alter table delivery_attempts add constraint delivery_attempts_pkey primary key (delivery_id, attempt)`.execute(
        db,
      );
      // Attempts are written only by the worker's record statement, joined to the delivery row it
      // updates in the same statement, and deliveries are never deleted: the foreign key's check,
      // a query and a row lock per recorded attempt, guarded nothing that statement does not.
      await sql`alter table delivery_attempts drop constraint delivery_attempts_delivery_id_fkey`.execute(db);
    },
  },
  '0009_signing_secrets': {
    async up(db: Kysely<unknown>) {
      // Standard Webhooks secrets: one current per business and mode (expires_at null), and the
      // previous ones until the end of their rotation's overlap.
      await db.schema
        .createTable('signing_secrets')
        .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
        .addColumn('business_id', 'text', (c) => c.notNull())
        .addColumn('mode', 'text', (c) => c.notNull().check(sql`mode in ('test', 'live')`))
        .addColumn('secret', 'text', (c) => c.notNull())
        .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
        .addColumn('expires_at', 'timestamptz')
        .execute();
      await sql`create unique index signing_secrets_current on signing_secrets (business_id, mode) where expires_at is null`.execute(
        db,
      );
      await db.schema
        .createIndex('signing_secrets_by_business')
        .on('signing_secrets')
        .columns(['business_id', 'mode', 'created_at desc'])
        .execute();
    },
  },
  '0010_delivery_instances': {
    async up(db: Kysely<unknown>) {
      // The running delivery workers, each renewing its row: their number and order decide which
      // URLs each one sends to (docs/decisions.md, "The per-URL limit across instances").
      await db.schema
        .createTable('delivery_instances')
        .addColumn('id', 'uuid', (c) => c.primaryKey())
        .addColumn('seen_at', 'timestamptz', (c) => c.notNull())
        .execute();
    },
  },
  '0011_dashboard_sessions': {
    async up(db: Kysely<unknown>) {
      // A dashboard sign-in: the cookie's hash (the cookie itself is never stored), the key it was
      // made with (by hash: revoking the key ends the session), and its CSRF token.
      await db.schema
        .createTable('dashboard_sessions')
        .addColumn('id_hash', 'text', (c) => c.primaryKey())
        .addColumn('key_hash', 'text', (c) => c.notNull())
        .addColumn('business_id', 'text', (c) => c.notNull())
        .addColumn('mode', 'text', (c) => c.notNull())
        .addColumn('csrf_token', 'text', (c) => c.notNull())
        .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
        .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('dashboard_sessions_expires')
        .on('dashboard_sessions')
        .column('expires_at')
        .execute();
    },
  },
  '0012_webhook_endpoints': {
    async up(db: Kysely<unknown>) {
      // A business's webhook destinations as objects: each with its event filter, its status and
      // its signature scheme (docs/decisions.md, "Endpoints as objects").
      await db.schema
        .createTable('webhook_endpoints')
        .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
        .addColumn('business_id', 'text', (c) => c.notNull())
        .addColumn('mode', 'text', (c) => c.notNull().check(sql`mode in ('test', 'live')`))
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
        .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
        .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
        .execute();
      // Keyset pages newest first; also the fan-out's look-up of a business's endpoints.
      await db.schema
        .createIndex('webhook_endpoints_page')
        .on('webhook_endpoints')
        .columns(['business_id', 'mode', 'created_at desc', 'id desc'])
        .execute();
      // The secrets of endpoints that have their own: `whsec_` (v1), or `whsk_` with its `whpk_`.
      await db.schema
        .createTable('endpoint_signing_secrets')
        .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
        .addColumn('endpoint_id', 'uuid', (c) =>
          c.notNull().references('webhook_endpoints.id').onDelete('cascade'),
        )
        .addColumn('secret', 'text', (c) => c.notNull())
        .addColumn('public_key', 'text')
        .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
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
    },
  },
  '0013_endpoint_failures': {
    async up(db: Kysely<unknown>) {
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
    },
  },
};
