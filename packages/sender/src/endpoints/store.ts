// A business's webhook endpoints: the rows behind /webhook-endpoints and the settings'
// webhook_urls (docs/decisions.md, "Endpoints as objects"). Their reads, and the statements that
// write a row, which only the endpoints' lifecycle (`./lifecycle.ts`) runs: it adds what each
// change does beside the row (secrets, held deliveries, runs of failures). Routes validate their
// input first; these functions only read and write.
import { sql, type Transaction } from 'kysely';
import type { BusinessScope, Db, Mode, Schema } from '../db/schema.js';
import { ApiError } from '../errors.js';
import { UUID } from '../ids.js';
import type { SignatureScheme } from '../signing/endpoint-secrets.js';
import { isoMicros } from '../timestamps.js';
import { EVERY_EVENT } from './filter.js';

/** A business in one mode: each has its own endpoints. */
export type EndpointOwner = BusinessScope;

/**
 * The most endpoints a business may have in one mode: the limit on webhook URLs before endpoints
 * (20), which the settings' webhook_urls still states, since it lists every endpoint's URL.
 */
export const MAX_ENDPOINTS = 20;

/** The columns an endpoint is read with. */
export const ENDPOINT_COLUMNS = [
  'id',
  'business_id',
  'mode',
  'url',
  'description',
  'enabled_events',
  'status',
  'disabled_reason',
  'disabled_at',
  'signature_scheme',
  'account_secrets',
  'rate_limit_per_second',
  'created_at',
  'updated_at',
] as const;

/** An endpoint as stored, with its position for keyset pages (`micros`). */
export interface EndpointRow {
  id: string;
  business_id: string;
  mode: Mode;
  url: string;
  description: string | null;
  enabled_events: string[];
  status: 'enabled' | 'disabled';
  disabled_reason: 'manual' | 'failing' | null;
  disabled_at: Date | null;
  signature_scheme: SignatureScheme;
  account_secrets: boolean;
  rate_limit_per_second: number | null;
  created_at: Date;
  updated_at: Date;
}

/** An endpoint as the API answers it. */
export interface EndpointView {
  id: string;
  url: string;
  description: string | null;
  enabled_events: string[];
  status: 'enabled' | 'disabled';
  disabled_reason: 'manual' | 'failing' | null;
  signature_scheme: SignatureScheme;
  /** `endpoint`: signed with its own secrets; `account`: with the business's (made through webhook_urls). */
  secret_scope: 'endpoint' | 'account';
  rate_limit_per_second: number | null;
  created_at: string;
  updated_at: string;
}

/** The API's view of a stored endpoint. */
export function toEndpointView(row: EndpointRow): EndpointView {
  return {
    id: row.id,
    url: row.url,
    description: row.description,
    enabled_events: row.enabled_events,
    status: row.status,
    disabled_reason: row.disabled_reason,
    signature_scheme: row.signature_scheme,
    secret_scope: row.account_secrets ? 'account' : 'endpoint',
    rate_limit_per_second: row.rate_limit_per_second,
    created_at: isoMicros(row.created_at),
    updated_at: isoMicros(row.updated_at),
  };
}

/** A query over one business's endpoints in one mode (every column of {@link EndpointRow}). */
export function selectEndpoints(db: Db, owner: EndpointOwner) {
  return db
    .selectFrom('webhook_endpoints')
    .select(ENDPOINT_COLUMNS)
    .where('business_id', '=', owner.businessId)
    .where('mode', '=', owner.mode);
}

/** One of the business's endpoints, or undefined (another business's, unknown, or not a UUID). */
export async function findEndpoint(
  db: Db,
  owner: EndpointOwner,
  id: string,
): Promise<EndpointRow | undefined> {
  if (!UUID.test(id)) return undefined;
  return (await selectEndpoints(db, owner).where('id', '=', id).executeTakeFirst()) as
    | EndpointRow
    | undefined;
}

/** {@link findEndpoint}, or 404 `not_found`. */
export async function getEndpoint(db: Db, owner: EndpointOwner, id: string): Promise<EndpointRow> {
  const row = await findEndpoint(db, owner, id);
  if (!row) throw new ApiError('not_found', `No webhook endpoint ${JSON.stringify(id)}.`);
  return row;
}

/**
 * Holds the business's endpoint lock to the end of the transaction: creations and settings
 * changes of one business queue on it, so that the limit holds under concurrent requests.
 */
export async function lockEndpoints(tx: Transaction<Schema>, owner: EndpointOwner): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtext(${`payhook:endpoints:${owner.mode}:${owner.businessId}`}))`.execute(
    tx,
  );
}

/** 422 naming `field` when `count` endpoints would be past {@link MAX_ENDPOINTS}. */
export function checkLimit(count: number, field: string): void {
  if (count > MAX_ENDPOINTS) {
    throw new ApiError(
      'validation_failed',
      `A business has at most ${MAX_ENDPOINTS} webhook endpoints in a mode.`,
      {
        details: [{ field, message: `at most ${MAX_ENDPOINTS} webhook endpoints per business and mode` }],
      },
    );
  }
}

/** What a new endpoint is made of (validated by the caller). */
export interface NewEndpoint {
  url: string;
  description?: string | null;
  enabledEvents?: readonly string[];
  signatureScheme?: SignatureScheme;
  rateLimitPerSecond?: number | null;
  /** Made through the settings' webhook_urls: signed with the business's secrets. */
  accountSecrets?: boolean;
}

/** How many endpoints the business has in the mode. */
export async function countEndpoints(db: Db, owner: EndpointOwner): Promise<number> {
  const { count } = await db
    .selectFrom('webhook_endpoints')
    .select((eb) => eb.fn.countAll<string>().as('count'))
    .where('business_id', '=', owner.businessId)
    .where('mode', '=', owner.mode)
    .executeTakeFirstOrThrow();
  return Number(count);
}

/** Inserts an endpoint's row (see `createEndpoint` in `./lifecycle.ts`, which adds its secret). */
export async function insertEndpoint(
  tx: Transaction<Schema>,
  owner: EndpointOwner,
  input: NewEndpoint,
): Promise<EndpointRow> {
  return (await tx
    .insertInto('webhook_endpoints')
    .values({
      business_id: owner.businessId,
      mode: owner.mode,
      url: input.url,
      description: input.description ?? null,
      enabled_events: JSON.stringify(input.enabledEvents ?? [EVERY_EVENT]),
      signature_scheme: input.signatureScheme ?? 'v1',
      account_secrets: input.accountSecrets ?? false,
      rate_limit_per_second: input.rateLimitPerSecond ?? null,
    })
    .returning(ENDPOINT_COLUMNS)
    .executeTakeFirstOrThrow()) as EndpointRow;
}

/** The fields an update may change; absent ones stay as they are. */
export interface EndpointChanges {
  url?: string;
  description?: string | null;
  enabledEvents?: readonly string[];
  rateLimitPerSecond?: number | null;
  /**
   * `enabled` clears `disabled_reason` and `disabled_at`; `disabled` sets them (`disabledReason`,
   * `manual` by default, and now).
   */
  status?: 'enabled' | 'disabled';
  disabledReason?: 'manual' | 'failing';
}

/**
 * Updates the row of one of the business's endpoints; undefined when it has no such endpoint
 * (see `updateEndpoint` in `./lifecycle.ts`, which adds what a status or URL change does).
 */
export async function updateEndpointRow(
  db: Db,
  owner: EndpointOwner,
  id: string,
  changes: EndpointChanges,
): Promise<EndpointRow | undefined> {
  if (!UUID.test(id)) return undefined;
  const disabled = changes.status === 'disabled';
  const row = await db
    .updateTable('webhook_endpoints')
    .set((eb) => ({
      updated_at: sql<Date>`clock_timestamp()`,
      ...(changes.url !== undefined ? { url: changes.url } : {}),
      ...(changes.description !== undefined ? { description: changes.description } : {}),
      ...(changes.enabledEvents !== undefined
        ? { enabled_events: JSON.stringify(changes.enabledEvents) }
        : {}),
      ...(changes.rateLimitPerSecond !== undefined
        ? { rate_limit_per_second: changes.rateLimitPerSecond }
        : {}),
      ...(changes.status === 'enabled'
        ? { status: 'enabled', disabled_reason: null, disabled_at: null }
        : {}),
      ...(disabled
        ? {
            status: 'disabled',
            disabled_reason: changes.disabledReason ?? 'manual',
            // A disabled endpoint disabled again keeps the time it was first disabled.
            disabled_at: eb.fn.coalesce('disabled_at', sql<Date>`clock_timestamp()`),
          }
        : {}),
    }))
    .where('id', '=', id)
    .where('business_id', '=', owner.businessId)
    .where('mode', '=', owner.mode)
    .returning(ENDPOINT_COLUMNS)
    .executeTakeFirst();
  return row as EndpointRow | undefined;
}

/**
 * Deletes endpoints of the business (their secrets go with them, by the foreign key); returns
 * those it deleted, each with whether it signed with the business's secrets.
 */
export async function deleteEndpointRows(
  tx: Transaction<Schema>,
  owner: EndpointOwner,
  ids: readonly string[],
): Promise<{ id: string; account_secrets: boolean }[]> {
  const valid = ids.filter((id) => UUID.test(id));
  if (valid.length === 0) return [];
  return tx
    .deleteFrom('webhook_endpoints')
    .where('id', 'in', valid)
    .where('business_id', '=', owner.businessId)
    .where('mode', '=', owner.mode)
    .returning(['id', 'account_secrets'])
    .execute();
}

/**
 * Endpoints that sign with the business's secrets, one per URL, in the list's order (each row a
 * microsecond after the one before), every one taking every event: the settings' new URLs.
 */
export async function insertAccountEndpoints(
  tx: Transaction<Schema>,
  owner: EndpointOwner,
  urls: readonly string[],
): Promise<void> {
  if (urls.length === 0) return;
  await sql`insert into webhook_endpoints (business_id, mode, url, account_secrets, created_at, updated_at)
    select ${owner.businessId}, ${owner.mode}, u.url, true,
           clock_timestamp() + (u.ord * interval '1 microsecond'), clock_timestamp()
    from unnest(${urls}::text[]) with ordinality as u(url, ord)`.execute(tx);
}

/**
 * Disables an enabled endpoint as failing (`disabled_reason: "failing"`) at `now`, only if its
 * run of failures began at or before `failingBefore` (read again under the row's lock, so an
 * attempt that succeeded since keeps it enabled). True when it did.
 */
export async function disableFailingRow(
  tx: Transaction<Schema>,
  endpointId: string,
  now: Date,
  failingBefore: Date,
): Promise<boolean> {
  const { rows } = await sql<{ id: string }>`update webhook_endpoints
    set status = 'disabled', disabled_reason = 'failing', disabled_at = ${now}, updated_at = ${now}
    where id = ${endpointId}::uuid and status = 'enabled'
      and exists (select 1 from endpoint_failures f
                  where f.endpoint_id = ${endpointId}::uuid and f.failing_since <= ${failingBefore})
    returning id`.execute(tx);
  return rows.length > 0;
}

/**
 * How many deliveries of each of `endpointIds` are pending (being tried, or held while it is
 * disabled), through the index of each endpoint's pending deliveries; endpoints with none are left
 * out.
 */
export async function pendingByEndpoint(
  db: Db,
  endpointIds: readonly string[],
): Promise<Map<string, number>> {
  if (endpointIds.length === 0) return new Map();
  const { rows } = await sql<{ endpoint_id: string; pending: number }>`
    select endpoint_id, count(*)::int as pending from deliveries
    where status = 'pending' and endpoint_id = any(${endpointIds}::uuid[])
    group by endpoint_id`.execute(db);
  return new Map(rows.map((r) => [r.endpoint_id, r.pending]));
}

/** The URLs of every endpoint of the business, oldest first: the settings' `webhook_urls`. */
export async function endpointUrls(db: Db, owner: EndpointOwner): Promise<string[]> {
  const rows = await db
    .selectFrom('webhook_endpoints')
    .select('url')
    .where('business_id', '=', owner.businessId)
    .where('mode', '=', owner.mode)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  return rows.map((row) => row.url);
}
