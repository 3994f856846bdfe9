// The signing secrets of endpoints that have their own (made through /webhook-endpoints): a
// `whsec_` secret for v1, a `whsk_` key with its `whpk_` public key for v1a, rotated with the
// rule of the business-wide secrets (signing/secret-set.ts): an overlap of up to 7 days, at most
// 5 valid at once (docs/decisions.md, "A secret per endpoint").
import { generateSigningKeyPair, generateSigningSecret } from '@payhook/core';
import type { Transaction } from 'kysely';
import type { Db, Schema } from '../db/schema.js';
import {
  currentSecrets,
  ensureSecret,
  rotateSecrets,
  type SecretSet,
  type SecretValidity,
  type StoredSecret,
  validityOf,
} from './secret-set.js';

/** An endpoint's signature scheme: HMAC-SHA256 (`v1`) or Ed25519 (`v1a`). */
export type SignatureScheme = 'v1' | 'v1a';

/** One secret of an endpoint as its business is shown it: the secret (v1) or the public key (v1a). */
export type EndpointSecretView = (
  | { secret: string; public_key?: never }
  | { public_key: string; secret?: never }
) &
  SecretValidity;

function freshSecret(scheme: SignatureScheme): { secret: string; public_key: string | null } {
  if (scheme === 'v1') return { secret: generateSigningSecret(), public_key: null };
  const pair = generateSigningKeyPair();
  return { secret: pair.secretKey, public_key: pair.publicKey };
}

/** The endpoint's own secrets, of its scheme. */
const endpointSecrets = (endpointId: string, scheme: SignatureScheme): SecretSet => ({
  table: 'endpoint_signing_secrets',
  owner: { endpoint_id: endpointId },
  lock: `payhook:endpoint-signing:${endpointId}`,
  fresh: () => freshSecret(scheme),
});

/** Makes the endpoint's first secret if it has none (safe against a concurrent call). */
export function ensureEndpointSecret(db: Db, endpointId: string, scheme: SignatureScheme): Promise<void> {
  return ensureSecret(db, endpointSecrets(endpointId, scheme));
}

/** The endpoint's valid secrets, the current one first (made first if it has none). */
export function currentEndpointSecrets(
  db: Db,
  endpointId: string,
  scheme: SignatureScheme,
): Promise<StoredSecret[]> {
  return currentSecrets(db, endpointSecrets(endpointId, scheme));
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
  const rows = await currentEndpointSecrets(db, endpointId, scheme);
  return rows.map((row) => ({
    ...(row.public_key === null ? { secret: row.secret } : { public_key: row.public_key }),
    ...validityOf(row),
  }));
}

/**
 * Rotates an endpoint's secret in the caller's transaction: the current one stays valid for
 * `overlapSeconds` more (0 ends it now), a new one of the endpoint's scheme becomes current, and
 * previous ones past the five valid at once end now. Rotations of one endpoint queue on an
 * advisory lock, so each makes exactly one new secret.
 */
export function rotateEndpointSecret(
  tx: Transaction<Schema>,
  endpointId: string,
  scheme: SignatureScheme,
  overlapSeconds: number,
): Promise<void> {
  return rotateSecrets(tx, endpointSecrets(endpointId, scheme), overlapSeconds);
}
