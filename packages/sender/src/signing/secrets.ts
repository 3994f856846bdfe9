// The signing secrets of each business and mode: created with the business, rotated with an
// overlap (docs/decisions.md, "Signatures beside the checksum").
import { generateSigningSecret } from '@payhook/core';
import { type Kysely, sql, type Transaction } from 'kysely';
import type { Mode, Schema } from '../db/schema.js';
import { isoMicros } from '../timestamps.js';

/** A business in one mode: test and live have their own secrets. */
export interface SecretOwner {
  businessId: string;
  mode: Mode;
}

/** How long a rotated-out secret is still signed with and valid, by default: 24 hours. */
export const DEFAULT_ROTATION_OVERLAP_SECONDS = 24 * 60 * 60;
/** The longest overlap a rotation may ask for: 7 days. */
export const MAX_ROTATION_OVERLAP_SECONDS = 7 * 24 * 60 * 60;
/**
 * The most secrets valid at once: the current one and up to four previous ones (rotations in quick
 * succession). Past it the oldest previous secret ends at once, so no business can make every
 * attempt sign with an unbounded number of secrets.
 */
export const MAX_VALID_SECRETS = 5;

type Db = Kysely<Schema> | Transaction<Schema>;

/** One secret as the API shows it to its own business. */
export interface SigningSecretView {
  secret: string;
  /** True for the secret new receivers should be given. */
  current: boolean;
  created_at: string;
  /** When a previous secret stops being signed with and accepted; null for the current one. */
  expires_at: string | null;
}

/**
 * Makes the business's first secret if it has none: one statement, safe against a concurrent
 * call (the unique index on the current secret keeps one).
 */
export async function ensureSigningSecret(db: Db, principal: SecretOwner): Promise<void> {
  await db
    .insertInto('signing_secrets')
    .values({ business_id: principal.businessId, mode: principal.mode, secret: generateSigningSecret() })
    .onConflict((oc) => oc.columns(['business_id', 'mode']).where('expires_at', 'is', null).doNothing())
    .execute();
}

/** The secrets valid now, the current one first, then the previous ones newest first. */
export async function validSigningSecrets(
  db: Db,
  principal: SecretOwner,
  now: Date = new Date(),
): Promise<{ secret: string; created_at: Date; expires_at: Date | null }[]> {
  return db
    .selectFrom('signing_secrets')
    .select(['secret', 'created_at', 'expires_at'])
    .where('business_id', '=', principal.businessId)
    .where('mode', '=', principal.mode)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)]))
    .orderBy(sql`expires_at is null`, 'desc')
    .orderBy('created_at', 'desc')
    .limit(MAX_VALID_SECRETS)
    .execute();
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
  let rows = await validSigningSecrets(db, principal);
  if (!rows.some((row) => row.expires_at === null)) {
    await ensureSigningSecret(db, principal);
    rows = await validSigningSecrets(db, principal);
  }
  return rows.map((row) => ({
    secret: row.secret,
    current: row.expires_at === null,
    created_at: isoMicros(row.created_at),
    expires_at: row.expires_at === null ? null : isoMicros(row.expires_at),
  }));
}

/**
 * Rotates in one transaction: the current secret becomes a previous one, valid for
 * `overlapSeconds` more (0 ends it at once, for a secret that leaked), a new one becomes current,
 * and previous secrets past {@link MAX_VALID_SECRETS} end now. Concurrent rotations of one
 * business queue on an advisory lock, so each makes exactly one new secret.
 */
export async function rotateSigningSecret(
  tx: Transaction<Schema>,
  principal: SecretOwner,
  overlapSeconds: number,
): Promise<void> {
  const { businessId, mode } = principal;
  // Rotations of one business queue on a lock of their own, held to the commit: each one sees
  // the current secret the one before it made.
  await sql`select pg_advisory_xact_lock(hashtext(${`payhook:signing:${mode}:${businessId}`}))`.execute(tx);
  await ensureSigningSecret(tx, principal);
  const current = await tx
    .selectFrom('signing_secrets')
    .select(['id'])
    .where('business_id', '=', businessId)
    .where('mode', '=', mode)
    .where('expires_at', 'is', null)
    .executeTakeFirstOrThrow();
  const now = (await sql<{ now: Date }>`select clock_timestamp() as now`.execute(tx)).rows[0]?.now as Date;
  const until = new Date(new Date(now).getTime() + overlapSeconds * 1000);
  await tx.updateTable('signing_secrets').set({ expires_at: until }).where('id', '=', current.id).execute();
  await tx
    .insertInto('signing_secrets')
    .values({ business_id: businessId, mode, secret: generateSigningSecret() })
    .execute();
  // Keep the newest previous secrets only (the current one and MAX_VALID_SECRETS - 1 others).
  const keep = await tx
    .selectFrom('signing_secrets')
    .select('id')
    .where('business_id', '=', businessId)
    .where('mode', '=', mode)
    .where('expires_at', '>', now)
    .orderBy('created_at', 'desc')
    .limit(MAX_VALID_SECRETS - 1)
    .execute();
  await tx
    .updateTable('signing_secrets')
    .set({ expires_at: now })
    .where('business_id', '=', businessId)
    .where('mode', '=', mode)
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
