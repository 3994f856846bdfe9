import type { ColumnType, Generated, Kysely, Transaction } from 'kysely';

/** Test or live: every key and every resource belongs to one business in one mode. */
export type Mode = 'test' | 'live';

/**
 * One business in one mode, as the code names it (a row's `business_id` and `mode`): who a request
 * acts for, and whose keys, secrets, endpoints and events a statement reads or writes.
 */
export interface BusinessScope {
  businessId: string;
  mode: Mode;
}

/** The owner of a key's or a resource's row: one business, in one mode. */
export interface BusinessOwned {
  business_id: string;
  mode: Mode;
}

/** When the row was inserted: the database's default, never updated. */
export type CreatedAt = ColumnType<Date, Date | undefined, never>;

/** API keys stored by `payhook keys create` (hashed; the key itself is shown once). */
export interface ApiKeysTable extends BusinessOwned {
  id: Generated<string>;
  /** SHA-256 of the key, hex. */
  key_hash: string;
  /** The first characters of the key, to tell keys apart in a listing. */
  key_prefix: string;
  created_at: CreatedAt;
}

/** Settings of one business in one mode (`PATCH /accounts/settings`). */
export interface AccountSettingsTable extends BusinessOwned {
  require_mfa: boolean;
  /**
   * The URLs before endpoints (migration 0012 made them endpoints): neither read nor written since,
   * its default `'[]'` fills a new row, and it stays for an instance of an earlier version during
   * an upgrade (docs/decisions.md, "The settings' `webhook_urls` column is no longer written").
   */
  webhook_urls: ColumnType<string[], string | undefined, string>;
  updated_at: ColumnType<Date, Date | undefined, Date>;
}

/** A customer of a business (`POST /customers`). */
export interface CustomersTable extends BusinessOwned {
  id: Generated<string>;
  first_name: string;
  last_name: string;
  email: string;
  phone_number: string;
  billing_address: ColumnType<Record<string, string>, string, string>;
  created_at: CreatedAt;
}

/** A payout destination of a business (`POST /beneficiaries`). */
export interface BeneficiariesTable extends BusinessOwned {
  id: string;
  currency: string;
  data: ColumnType<Record<string, unknown>, string, string>;
  created_at: CreatedAt;
}

/** A payment session and its payment. */
export interface PaymentsTable extends BusinessOwned {
  id: string;
  reference: string;
  status: 'pending' | 'captured' | 'settled' | 'failed';
  method_type: string | null;
  data: ColumnType<Record<string, unknown>, string, string>;
  expires_at: ColumnType<Date, Date, Date>;
  created_at: CreatedAt;
  captured_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  auth_type: string | null;
  links: ColumnType<Record<string, string>, string | undefined, string>;
}

/** An event of the outbox, with the exact payload every delivery attempt sends. */
export interface EventsTable extends BusinessOwned {
  id: string;
  type: string;
  payment_id: string | null;
  payload: string;
  created_at: CreatedAt;
  /**
   * No delivery to a webhook URL: no endpoint took the event when it was written, and none was
   * added since (a listener's `cli:` deliveries do not count). What `delivery_status=none` reads.
   */
  no_webhook: Generated<boolean>;
  /**
   * A delivery to a webhook URL failed for good and was not sent again (or the event also has one
   * pending: the mark is what `delivery_status=failed` looks among, and each event's status is
   * read exactly).
   */
  failed_delivery: Generated<boolean>;
}

/** One event to one webhook URL. */
export interface DeliveriesTable {
  id: Generated<string>;
  event_id: string;
  url: string;
  status: Generated<'pending' | 'delivered' | 'failed'>;
  attempts: Generated<number>;
  next_attempt_at: ColumnType<Date, Date | undefined, Date>;
  created_at: CreatedAt;
  /** Set while a worker holds the delivery; only that worker may record its attempt. */
  claim_token: string | null;
  first_attempt_at: Date | null;
  last_attempt_at: Date | null;
  /** When it was delivered, or failed for good. */
  finished_at: Date | null;
  last_status_code: number | null;
  last_error: string | null;
  /** The delivery that a redelivery made in place of this failed one. */
  superseded_by: string | null;
  /** The endpoint it was made for (migration 0012); null before endpoints, and for a listener's. */
  endpoint_id: ColumnType<string | null, string | null | undefined, string | null>;
}

/** One attempt of a delivery: what was sent where, and what came back. */
export interface DeliveryAttemptsTable {
  /** With `attempt`, the primary key. */
  delivery_id: string;
  /** 1 for the first attempt. */
  attempt: number;
  url: string;
  started_at: Date;
  latency_ms: number;
  status_code: number | null;
  /** The first 4 KiB of the response body. */
  response_body: string | null;
  error_code: string | null;
  error_message: string | null;
}

/** A POST's first response under its Idempotency-Key, replayed for 24 hours. */
export interface IdempotencyKeysTable extends BusinessOwned {
  key: string;
  /** SHA-256 of the method, path and canonical body: the same key with another request is refused. */
  request_hash: string;
  /** Null while the first request is still running. */
  response_status: number | null;
  response_body: string | null;
  created_at: ColumnType<Date, Date | undefined, Date>;
}

/** A Standard Webhooks signing secret of one business in one mode. */
export interface SigningSecretsTable extends BusinessOwned {
  id: Generated<string>;
  /** `whsec_` and the base64 of 32 random bytes; kept as is, since every attempt signs with it. */
  secret: string;
  created_at: CreatedAt;
  /** Null for the current secret; for a previous one, the end of its rotation's overlap. */
  expires_at: Date | null;
}

/** A delivery worker that is running, and when it last said so (`delivery/membership.ts`). */
export interface DeliveryInstancesTable {
  id: string;
  seen_at: Date;
}

/** A dashboard sign-in (migration 0011): the cookie and the key are stored by hash only. */
export interface DashboardSessionsTable extends BusinessOwned {
  id_hash: string;
  key_hash: string;
  csrf_token: string;
  created_at: CreatedAt;
  expires_at: Date;
}

/** One of a business's webhook endpoints (migration 0012): where events go, and which. */
export interface WebhookEndpointsTable extends BusinessOwned {
  id: Generated<string>;
  url: string;
  description: string | null;
  /** Event types it takes, or `["*"]` for every one. */
  enabled_events: ColumnType<string[], string | undefined, string>;
  status: ColumnType<'enabled' | 'disabled', 'enabled' | 'disabled' | undefined, 'enabled' | 'disabled'>;
  /** Why it is disabled: by its business (`manual`) or after failing (`failing`); null when enabled. */
  disabled_reason: 'manual' | 'failing' | null;
  disabled_at: Date | null;
  signature_scheme: ColumnType<'v1' | 'v1a', 'v1' | 'v1a' | undefined, 'v1' | 'v1a'>;
  /** Made through the settings' `webhook_urls`: signed with the business's secrets, not its own. */
  account_secrets: ColumnType<boolean, boolean | undefined, boolean>;
  rate_limit_per_second: number | null;
  /** The rate limit's state: no attempt to the endpoint is claimed before it. */
  next_send_at: Date | null;
  created_at: CreatedAt;
  updated_at: ColumnType<Date, Date | undefined, Date>;
}

/** A signing secret of one endpoint: `whsec_` (v1), or a `whsk_` key with its `whpk_` public key (v1a). */
export interface EndpointSigningSecretsTable {
  id: Generated<string>;
  endpoint_id: string;
  secret: string;
  /** The `whpk_` public key of a v1a secret key; null for v1. */
  public_key: string | null;
  created_at: CreatedAt;
  /** Null for the current secret; for a previous one, the end of its rotation's overlap. */
  expires_at: Date | null;
}

/**
 * An endpoint's current run of failed attempts (migration 0013): a row only while every attempt to
 * it since `failing_since` failed. Kept by the attempt-record statement, read by the sweeper.
 */
export interface EndpointFailuresTable {
  endpoint_id: string;
  failing_since: Date;
  last_failure_at: Date;
  /** Failed attempts since `failing_since`. */
  attempts: number;
  /** The highest warning level logged for this run: 0, 50, 75 or 90. */
  warned: ColumnType<number, number | undefined, number>;
}

/**
 * One endpoint's attempts in one hour (migration 0014), kept by the attempt-record statement: what
 * the endpoint's charts and health read (`attempt-hours.ts`).
 */
export interface EndpointAttemptHoursTable {
  endpoint_id: string;
  /** The start of the hour (UTC). */
  hour: Date;
  attempts: number;
  /** Attempts answered 200 (the event delivered). */
  succeeded: number;
  /** Attempts per latency bucket (`LATENCY_BOUNDS_MS`). */
  latency_histogram: number[];
  /** The hour's latest failed attempt, if any. */
  last_error_at: Date | null;
  last_error_status: number | null;
  last_error_code: string | null;
  last_error_message: string | null;
}

/**
 * An endpoint's status and filter from `at` until its next row (migration 0015, kept by a
 * trigger on `webhook_endpoints`): what a recovery reads to know when events could have been
 * made without a delivery to it.
 */
export interface EndpointHistoryTable {
  endpoint_id: string;
  at: Date;
  status: 'enabled' | 'disabled';
  enabled_events: ColumnType<string[], string, string>;
}

/**
 * The typed schema of the sender's database, one table a key; migrations in `migrations.ts`
 * create it.
 *
 * @example
 * ```ts
 * const database = await openDatabase({ dataDir: '.payhook/data' });
 * const rows = await database.db.selectFrom('events').select(['id', 'type']).limit(10).execute();
 * ```
 */
export interface Schema {
  api_keys: ApiKeysTable;
  account_settings: AccountSettingsTable;
  customers: CustomersTable;
  beneficiaries: BeneficiariesTable;
  payments: PaymentsTable;
  events: EventsTable;
  deliveries: DeliveriesTable;
  delivery_attempts: DeliveryAttemptsTable;
  idempotency_keys: IdempotencyKeysTable;
  signing_secrets: SigningSecretsTable;
  delivery_instances: DeliveryInstancesTable;
  dashboard_sessions: DashboardSessionsTable;
  webhook_endpoints: WebhookEndpointsTable;
  endpoint_signing_secrets: EndpointSigningSecretsTable;
  endpoint_failures: EndpointFailuresTable;
  endpoint_attempt_hours: EndpointAttemptHoursTable;
  endpoint_history: EndpointHistoryTable;
}

/** The database or a transaction on it: what a statement that may run in either takes. */
export type Db = Kysely<Schema> | Transaction<Schema>;
