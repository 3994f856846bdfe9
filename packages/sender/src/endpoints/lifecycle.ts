// The life of a webhook endpoint, in one place: its creation (with its first secret), its changes
// and what a status or URL change does beside the row, its deletion (with the deleted-endpoint
// exit of its pending deliveries), the settings' webhook_urls, its secrets' rotation, its
// recovery, and the sweeper's disabling of a failing endpoint (`./health.ts` decides, this
// module disables). The routes of /webhook-endpoints and of the settings, the dashboard (through
// the API), the CLI (through the API) and the sweeper come here; nothing else writes an
// endpoint's row (`./store.ts` holds the statements) or its secrets (sealed at rest by
// `signing/secret-set.ts`). An endpoint's deliveries change through `delivery/delivery-state.ts`
// only. Its rate limit's send times are reserved by `./rate-limit.ts`, for the worker.
import type { Kysely, Transaction } from 'kysely';
import type { Schema } from '../db/schema.js';
import { endDeletedEndpoints, holdDeliveries, resumeHeldDeliveries } from '../delivery/delivery-state.js';
import { forgetFailures } from '../delivery/sql/endpoint-failures.js';
import { ensureEndpointSecret, rotateEndpointSecret } from '../signing/endpoint-secrets.js';
import {
  checkLimit,
  countEndpoints,
  deleteEndpointRows,
  disableFailingRow,
  type EndpointChanges,
  type EndpointOwner,
  type EndpointRow,
  endpointUrls,
  findEndpoint,
  insertAccountEndpoints,
  insertEndpoint,
  lockEndpoints,
  type NewEndpoint,
  updateEndpointRow,
} from './store.js';

export { RECOVER_MAX_DAYS, recoverEndpoint } from '../delivery/recover.js';

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
  checkLimit((await countEndpoints(tx, owner)) + 1, 'url');
  const row = await insertEndpoint(tx, owner, input);
  if (!row.account_secrets) await ensureEndpointSecret(tx, row.id, row.signature_scheme);
  return row;
}

/**
 * Updates one of the business's endpoints in the caller's transaction, with what the change does
 * beside the row; undefined when it has no such endpoint. A filter change applies to events
 * created after it (deliveries are made when an event is). Disabling an enabled endpoint holds
 * its pending deliveries; enabling a disabled one resumes them, each with a fresh 48 hours, and
 * forgets its run of failures (it has a whole period before it can be disabled again); a new URL
 * forgets the failures of the old one (another URL is another receiver).
 *
 * @example
 * ```ts
 * await db.transaction().execute((tx) => updateEndpoint(tx, owner, id, { status: 'enabled' }, new Date()));
 * ```
 */
export async function updateEndpoint(
  tx: Transaction<Schema>,
  owner: EndpointOwner,
  id: string,
  changes: EndpointChanges,
  now: Date = new Date(),
): Promise<EndpointRow | undefined> {
  const before = await findEndpoint(tx, owner, id);
  if (!before) return undefined;
  const row = await updateEndpointRow(tx, owner, id, changes);
  if (!row) return undefined;
  if (before.status === 'disabled' && row.status === 'enabled') await resumeEndpoint(tx, row.id, now);
  else if (before.status === 'enabled' && row.status === 'disabled') await holdDeliveries(tx, row.id);
  if (row.url !== before.url) await forgetFailures(tx, row.id);
  return row;
}

/** Enabling's side: the held deliveries due at `now`, the run of failures forgotten. */
async function resumeEndpoint(db: Kysely<Schema>, endpointId: string, now: Date): Promise<void> {
  await resumeHeldDeliveries(db, endpointId, now);
  await forgetFailures(db, endpointId);
}

/**
 * Deletes one of the business's endpoints in the caller's transaction (its secrets go with it);
 * false when it has no such endpoint. Its pending deliveries end, failed with
 * `endpoint_deleted`: nothing could sign them.
 */
export async function deleteEndpoint(
  tx: Transaction<Schema>,
  owner: EndpointOwner,
  id: string,
): Promise<boolean> {
  const deleted = await deleteEndpointRows(tx, owner, [id]);
  await endDeletedEndpoints(
    tx,
    deleted.map((e) => e.id),
  );
  return deleted.length > 0;
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
    .select(['id', 'url'])
    .where('business_id', '=', owner.businessId)
    .where('mode', '=', owner.mode)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  const wanted = [...urls];
  const removed: string[] = [];
  for (const endpoint of current) {
    const at = wanted.indexOf(endpoint.url);
    if (at >= 0) wanted.splice(at, 1);
    else removed.push(endpoint.id);
  }
  const deleted = await deleteEndpointRows(tx, owner, removed);
  await endDeletedEndpoints(
    tx,
    deleted.filter((e) => !e.account_secrets).map((e) => e.id),
  );
  await insertAccountEndpoints(tx, owner, wanted);
  return endpointUrls(tx, owner);
}

/**
 * Rotates the secret of an endpoint that signs with its own, in the caller's transaction: the
 * current one stays valid for `overlapSeconds` more, a new one becomes current (see
 * `rotateEndpointSecret` in `signing/endpoint-secrets.ts`).
 */
export function rotateSecret(
  tx: Transaction<Schema>,
  endpoint: Pick<EndpointRow, 'id' | 'signature_scheme'>,
  overlapSeconds: number,
): Promise<void> {
  return rotateEndpointSecret(tx, endpoint.id, endpoint.signature_scheme, overlapSeconds);
}

/**
 * The sweeper's disabling of a failing endpoint (`disabled_reason: "failing"`), in one
 * transaction: only while it is enabled and its run of failures began at or before
 * `failingBefore`; its pending deliveries are held until it is enabled again. True when it did.
 *
 * @example
 * ```ts
 * const disabled = await disableFailingEndpoint(db, id, now, new Date(now.getTime() - rule.afterMs));
 * ```
 */
export function disableFailingEndpoint(
  db: Kysely<Schema>,
  endpointId: string,
  now: Date,
  failingBefore: Date,
): Promise<boolean> {
  return db.transaction().execute(async (tx) => {
    const disabled = await disableFailingRow(tx, endpointId, now, failingBefore);
    if (disabled) await holdDeliveries(tx, endpointId);
    return disabled;
  });
}
