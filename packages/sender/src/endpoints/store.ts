// A business's webhook endpoints: the rows behind /webhook-endpoints and the settings'
// webhook_urls (docs/decisions.md, "Endpoints as objects"). Routes validate their input first;
// these functions only read and write.
import { sql, type Transaction } from 'kysely';
import type { Db, Mode, Schema } from '../db/schema.js';
import { ApiError } from '../errors.js';
import { UUID } from '../ids.js';
import { ensureEndpointSecret, type SignatureScheme } from '../signing/endpoint-secrets.js';
import { isoMicros } from '../timestamps.js';
import { EVERY_EVENT } from './filter.js';

/** A business in one mode: each has its own endpoints. */
export interface EndpointOwner {
  businessId: string;
  mode: Mode;
}

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
function checkLimit(count: number, field: string): void {
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

/**
 * Creates an endpoint in the caller's transaction, within the business's limit (422 past it),
 * with its first secret unless it signs with the business's.
 *
 * @example
 * ```ts
 * const row = await db.transaction().execute((tx) => createEndpoint(tx, owner, { url, enabledEvents: ['*'] }));
 * ```
 */
export async function createEndpoint(
  tx: Transaction<Schema>,
  owner: EndpointOwner,
  input: NewEndpoint,
): Promise<EndpointRow> {
  await lockEndpoints(tx, owner);
  const { count } = await tx
    .selectFrom('webhook_endpoints')
    .select((eb) => eb.fn.countAll<string>().as('count'))
    .where('business_id', '=', owner.businessId)
    .where('mode', '=', owner.mode)
    .executeTakeFirstOrThrow();
  checkLimit(Number(count) + 1, 'url');
  const scheme = input.signatureScheme ?? 'v1';
  const row = (await tx
    .insertInto('webhook_endpoints')
    .values({
      business_id: owner.businessId,
      mode: owner.mode,
      url: input.url,
      description: input.description ?? null,
      enabled_events: JSON.stringify(input.enabledEvents ?? [EVERY_EVENT]),
      signature_scheme: scheme,
      account_secrets: input.accountSecrets ?? false,
      rate_limit_per_second: input.rateLimitPerSecond ?? null,
    })
    .returning(ENDPOINT_COLUMNS)
    .executeTakeFirstOrThrow()) as EndpointRow;
  if (!row.account_secrets) await ensureEndpointSecret(tx, row.id, scheme);
  return row;
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
 * Updates one of the business's endpoints; undefined when it has no such endpoint. A filter
 * change applies to events created after it: deliveries are made when an event is.
 */
export async function updateEndpoint(
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
 * Deletes one of the business's endpoints (its secrets go with it); false when it has no such
 * endpoint. Its pending deliveries end, failed with `endpoint_deleted`: nothing could sign them.
 */
export async function deleteEndpoint(
  tx: Transaction<Schema>,
  owner: EndpointOwner,
  id: string,
): Promise<boolean> {
  if (!UUID.test(id)) return false;
  const deleted = await tx
    .deleteFrom('webhook_endpoints')
    .where('id', '=', id)
    .where('business_id', '=', owner.businessId)
    .where('mode', '=', owner.mode)
    .returning('id')
    .executeTakeFirst();
  if (!deleted) return false;
  await endPendingDeliveries(tx, [id]);
  return true;
}

/** Ends the pending deliveries of deleted endpoints that signed with their own secrets, and forgets their counts. */
async function endPendingDeliveries(tx: Transaction<Schema>, endpointIds: readonly string[]): Promise<void> {
  if (endpointIds.length === 0) return;
  await tx
    .updateTable('deliveries')
    .set({
      status: 'failed',
      finished_at: sql<Date>`clock_timestamp()`,
      claim_token: null,
      last_error: 'endpoint_deleted',
    })
    .where('endpoint_id', 'in', endpointIds)
    .where('status', '=', 'pending')
    .execute();
  // Its hourly counts: no page shows them any more.
  await tx.deleteFrom('endpoint_attempt_hours').where('endpoint_id', 'in', endpointIds).execute();
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

/**
 * The settings' `webhook_urls = urls`, in the caller's transaction: the list of every endpoint's
 * URL becomes `urls`. An endpoint whose URL is in the list is kept as it is (one per occurrence);
 * one whose URL is not is deleted (the pending deliveries of one that signs with the business's
 * secrets go on, as a removed URL's always did; those of one with its own secrets end);
 * each URL left over becomes an endpoint that takes every event and signs with the business's
 * secrets. Returns the URLs, oldest endpoint first.
 */
export async function replaceEndpointUrls(
  tx: Transaction<Schema>,
  owner: EndpointOwner,
  urls: readonly string[],
): Promise<string[]> {
  await lockEndpoints(tx, owner);
  checkLimit(urls.length, 'webhook_urls');
  const current = await tx
    .selectFrom('webhook_endpoints')
    .select(['id', 'url', 'account_secrets'])
    .where('business_id', '=', owner.businessId)
    .where('mode', '=', owner.mode)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  const wanted = [...urls];
  const removed: { id: string; account_secrets: boolean }[] = [];
  for (const endpoint of current) {
    const at = wanted.indexOf(endpoint.url);
    if (at >= 0) wanted.splice(at, 1);
    else removed.push(endpoint);
  }
  if (removed.length > 0) {
    await tx
      .deleteFrom('webhook_endpoints')
      .where(
        'id',
        'in',
        removed.map((e) => e.id),
      )
      .execute();
    await endPendingDeliveries(
      tx,
      removed.filter((e) => !e.account_secrets).map((e) => e.id),
    );
  }
  if (wanted.length > 0) {
    // One statement, each row a microsecond after the one before: the list keeps its order.
    await sql`insert into webhook_endpoints (business_id, mode, url, account_secrets, created_at, updated_at)
      select ${owner.businessId}, ${owner.mode}, u.url, true,
             clock_timestamp() + (u.ord * interval '1 microsecond'), clock_timestamp()
      from unnest(${wanted}::text[]) with ordinality as u(url, ord)`.execute(tx);
  }
  return endpointUrls(tx, owner);
}
