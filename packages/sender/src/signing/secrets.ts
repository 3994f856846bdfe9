// The signing secrets of each business and mode: created with the business, rotated with an
// overlap (docs/decisions.md, "Signatures beside the checksum").
import { generateSigningSecret } from '@payhook/core';
import type { Transaction } from 'kysely';
import type { BusinessScope, Db, Schema } from '../db/schema.js';
import {
  currentSecrets,
  ensureSecret,
  rotateSecrets,
  type SecretSet,
  type SecretValidity,
  type StoredSecret,
  validityOf,
} from './secret-set.js';

/** A business in one mode: test and live have their own secrets. */
export type SecretOwner = BusinessScope;

/** How long a rotated-out secret is still signed with and valid, by default: 24 hours. */
export const DEFAULT_ROTATION_OVERLAP_SECONDS = 24 * 60 * 60;
/** The longest overlap a rotation may ask for: 7 days. */
export const MAX_ROTATION_OVERLAP_SECONDS = 7 * 24 * 60 * 60;

/** One secret as the API shows it to its own business. */
export interface SigningSecretView extends SecretValidity {
  secret: string;
}

/** The business's secrets, in one mode. */
const businessSecrets = ({ businessId, mode }: SecretOwner): SecretSet => ({
  table: 'signing_secrets',
  owner: { business_id: businessId, mode },
  lock: `payhook:signing:${mode}:${businessId}`,
  fresh: () => ({ secret: generateSigningSecret() }),
});

/**
 * Makes the business's first secret if it has none: one statement, safe against a concurrent
 * call (the unique index on the current secret keeps one).
 */
export function ensureSigningSecret(db: Db, principal: SecretOwner): Promise<void> {
  return ensureSecret(db, businessSecrets(principal));
}

/**
 * The secrets valid now, the current one first, then the previous ones newest first; a business
 * whose secret was never made (its key came from the configuration) gets one first.
 */
export function currentSigningSecrets(db: Db, principal: SecretOwner): Promise<StoredSecret[]> {
  return currentSecrets(db, businessSecrets(principal));
}

/**
 * The valid secrets as the API shows them (`GET /accounts/signing-secrets`), the current one
 * first, made first if the business has none yet.
 *
 * @example
 * ```ts
 * const [current] = await listSigningSecrets(database.db, { businessId, mode: 'test' });
 * console.log(`WEBHOOK_SECRET=${current?.secret}`);
 * ```
 */
export async function listSigningSecrets(db: Db, principal: SecretOwner): Promise<SigningSecretView[]> {
  const rows = await currentSigningSecrets(db, principal);
  return rows.map((row) => ({ secret: row.secret, ...validityOf(row) }));
}

/**
 * Rotates in one transaction: the current secret becomes a previous one, valid for
 * `overlapSeconds` more (0 ends it at once, for a secret that leaked), a new one becomes current,
 * and previous secrets past the five valid at once end now. Concurrent rotations of one
 * business queue on an advisory lock, so each makes exactly one new secret.
 */
export function rotateSigningSecret(
  tx: Transaction<Schema>,
  principal: SecretOwner,
  overlapSeconds: number,
): Promise<void> {
  return rotateSecrets(tx, businessSecrets(principal), overlapSeconds);
}
