// The signing secrets of endpoints that have their own (made through /webhook-endpoints): a
// `whsec_` secret for v1, a `whsk_` key with its `whpk_` public key for v1a, rotated with the
// rules of the business-wide secrets (signing/secrets.ts): an overlap of up to 7 days, at most 5
// valid at once (docs/decisions.md, "Secrets per endpoint").
import { generateSigningKeyPair, generateSigningSecret } from '@payhook/core';
import { type Kysely, sql, type Transaction } from 'kysely';
import type { Schema } from '../db/schema.js';
import { isoMicros } from '../timestamps.js';
import { MAX_VALID_SECRETS } from './secrets.js';

type Db = Kysely<Schema> | Transaction<Schema>;

/** An endpoint's signature scheme: HMAC-SHA256 (`v1`) or Ed25519 (`v1a`). */
export type SignatureScheme = 'v1' | 'v1a';

/** One secret of an endpoint as its business is shown it: the secret (v1) or the public key (v1a). */
export type EndpointSecretView = (
  | { secret: string; public_key?: never }
  | { public_key: string; secret?: never }
) & {
  current: boolean;
  created_at: string;
  expires_at: string | null;
};

function freshSecret(scheme: SignatureScheme): { secret: string; public_key: string | null } {
  if (scheme === 'v1') return { secret: generateSigningSecret(), public_key: null };
  const pair = generateSigningKeyPair();
  return { secret: pair.secretKey, public_key: pair.publicKey };
}

/** Makes the endpoint's first secret if it has none (safe against a concurrent call). */
export async function ensureEndpointSecret(
  db: Db,
  endpointId: string,
  scheme: SignatureScheme,
): Promise<void> {
  await db
    .insertInto('endpoint_signing_secrets')
    .values({ endpoint_id: endpointId, ...freshSecret(scheme) })
    .onConflict((oc) => oc.column('endpoint_id').where('expires_at', 'is', null).doNothing())
    .execute();
}

/** The endpoint's secrets valid at `now`, the current one first, then the previous ones newest first. */
export function validEndpointSecrets(
  db: Db,
  endpointId: string,
  now: Date = new Date(),
): Promise<{ secret: string; public_key: string | null; created_at: Date; expires_at: Date | null }[]> {
  return db
    .selectFrom('endpoint_signing_secrets')
    .select(['secret', 'public_key', 'created_at', 'expires_at'])
    .where('endpoint_id', '=', endpointId)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)]))
    .orderBy(sql`expires_at is null`, 'desc')
    .orderBy('created_at', 'desc')
    .limit(MAX_VALID_SECRETS)
    .execute();
}

/**
 * The valid secrets of an endpoint as its business is shown them, the current one first: the
 * `whsec_` secret of a v1 endpoint, the `whpk_` public key (never the secret key) of a v1a one.
 *
 * @example
 * ```ts
 * const [current] = await listEndpointSecrets(db, endpoint.id, 'v1a'); // { public_key: 'whpk_...' }
 * ```
 */
export async function listEndpointSecrets(
  db: Db,
  endpointId: string,
  scheme: SignatureScheme,
): Promise<EndpointSecretView[]> {
  let rows = await validEndpointSecrets(db, endpointId);
  if (!rows.some((row) => row.expires_at === null)) {
    await ensureEndpointSecret(db, endpointId, scheme);
    rows = await validEndpointSecrets(db, endpointId);
  }
  return rows.map((row) => ({
    ...(row.public_key === null ? { secret: row.secret } : { public_key: row.public_key }),
    current: row.expires_at === null,
    created_at: isoMicros(row.created_at),
    expires_at: row.expires_at === null ? null : isoMicros(row.expires_at),
  }));
}

/**
 * Rotates an endpoint's secret in the caller's transaction: the current one stays valid for
 * `overlapSeconds` more (0 ends it now), a new one of the endpoint's scheme becomes current, and
 * previous ones past {@link MAX_VALID_SECRETS} end now. Rotations of one endpoint queue on an
 * advisory lock, so each makes exactly one new secret.
 */
export async function rotateEndpointSecret(
  tx: Transaction<Schema>,
  endpointId: string,
  scheme: SignatureScheme,
  overlapSeconds: number,
): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtext(${`payhook:endpoint-signing:${endpointId}`}))`.execute(tx);
  await ensureEndpointSecret(tx, endpointId, scheme);
  const now = (await sql<{ now: Date }>`select clock_timestamp() as now`.execute(tx)).rows[0]?.now as Date;
  const until = new Date(new Date(now).getTime() + overlapSeconds * 1000);
  await tx
    .updateTable('endpoint_signing_secrets')
    .set({ expires_at: until })
    .where('endpoint_id', '=', endpointId)
    .where('expires_at', 'is', null)
    .execute();
  await tx
    .insertInto('endpoint_signing_secrets')
    .values({ endpoint_id: endpointId, ...freshSecret(scheme) })
    .execute();
  const keep = await tx
    .selectFrom('endpoint_signing_secrets')
    .select('id')
    .where('endpoint_id', '=', endpointId)
    .where('expires_at', '>', now)
    .orderBy('created_at', 'desc')
    .limit(MAX_VALID_SECRETS - 1)
    .execute();
  await tx
    .updateTable('endpoint_signing_secrets')
    .set({ expires_at: now })
    .where('endpoint_id', '=', endpointId)
    .where('expires_at', '>', now)
    .$if(keep.length > 0, (q) =>
      q.where(
        'id',
        'not in',
        keep.map((row) => row.id),
      ),
    )
    .execute();
}
