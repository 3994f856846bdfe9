import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { ConfiguredKey } from '../config.js';
import type { BusinessScope, Schema } from '../db/schema.js';
import { ensureSigningSecret } from '../signing/secrets.js';

/** Who a request acts for: one business in one mode. */
export type Principal = BusinessScope;

/** SHA-256 of a key, hex: what the database stores. */
export function hashKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

/**
 * Creates an API key for a business and mode, stores its hash, and returns the key: the only
 * time it is shown. A business's first key also makes its signing secret.
 *
 * @example
 * ```ts
 * const key = await createApiKey(db, { businessId, mode: 'test' }); // sk_test_...
 * ```
 */
export async function createApiKey(db: Kysely<Schema>, principal: Principal): Promise<string> {
  const key = `sk_${principal.mode}_${randomBytes(24).toString('base64url')}`;
  await db
    .insertInto('api_keys')
    .values({
      business_id: principal.businessId,
      mode: principal.mode,
      key_hash: hashKey(key),
      key_prefix: key.slice(0, KEY_PREFIX_LENGTH),
    })
    .execute();
  await ensureSigningSecret(db, principal);
  return key;
}

/** How many first characters of a key are stored, to tell keys apart in a listing. */
export const KEY_PREFIX_LENGTH = 12;

/** A stored key, as a listing shows it (never the key itself). */
export interface StoredKey {
  prefix: string;
  businessId: string;
  mode: Principal['mode'];
  createdAt: Date;
}

/**
 * Revokes one stored API key, given whole or by the prefix a listing shows: the key is deleted,
 * so the sender refuses it at once (it looks keys up at every request). A prefix that matches
 * several keys revokes none and returns them all, so that the caller can ask for the whole key.
 * Keys from the configuration (`PAYHOOK_API_KEYS`) are not stored and not revocable here.
 *
 * @example
 * ```ts
 * const { revoked, matches } = await revokeApiKey(db, 'sk_test_AbCd');
 * ```
 */
export async function revokeApiKey(
  db: Kysely<Schema>,
  keyOrPrefix: string,
): Promise<{ revoked: StoredKey | undefined; matches: StoredKey[] }> {
  const whole = /^sk_(test|live)_[A-Za-z0-9_-]{32}$/.test(keyOrPrefix);
  if (!whole && (keyOrPrefix.length === 0 || keyOrPrefix.length > KEY_PREFIX_LENGTH)) {
    throw new TypeError(
      `Give the whole key or its prefix of at most ${KEY_PREFIX_LENGTH} characters (as a listing shows it).`,
    );
  }
  let query = db.selectFrom('api_keys').select(['id', 'key_prefix', 'business_id', 'mode', 'created_at']);
  query = whole
    ? query.where('key_hash', '=', hashKey(keyOrPrefix))
    : query.where('key_prefix', 'like', `${keyOrPrefix.replace(/[\\%_]/g, '\\$&')}%`);
  const rows = await query.execute();
  const matches = rows.map((r) => ({
    prefix: r.key_prefix,
    businessId: r.business_id,
    mode: r.mode,
    createdAt: new Date(r.created_at),
  }));
  if (rows.length !== 1) return { revoked: undefined, matches };
  await db
    .deleteFrom('api_keys')
    .where('id', '=', (rows[0] as { id: string }).id)
    .execute();
  return { revoked: matches[0], matches };
}

/**
 * The SHA-256 of each configured key, computed once per configuration array (configurations are
 * not edited in place: a new array is a new configuration).
 */
const configuredHashes = new WeakMap<readonly ConfiguredKey[], Buffer[]>();

function hashesOf(configured: readonly ConfiguredKey[]): Buffer[] {
  let hashes = configuredHashes.get(configured);
  if (hashes === undefined || hashes.length !== configured.length) {
    hashes = configured.map((entry) => createHash('sha256').update(entry.key, 'utf8').digest());
    configuredHashes.set(configured, hashes);
  }
  return hashes;
}

/**
 * Finds who a presented key belongs to: a key from the configuration (compared in constant time
 * by hash) or one stored in the database (looked up by hash).
 */
export async function authenticate(
  db: Kysely<Schema>,
  configured: readonly ConfiguredKey[],
  presented: string,
): Promise<Principal | undefined> {
  return principalOfKeyHash(db, configured, createHash('sha256').update(presented, 'utf8').digest());
}

/**
 * Who the key with this SHA-256 hash (raw bytes, or hex as {@link hashKey} gives) belongs to, if
 * it is still valid: what a dashboard session checks on each request, so that revoking a key ends
 * the sessions made with it.
 */
export async function principalOfKeyHash(
  db: Kysely<Schema>,
  configured: readonly ConfiguredKey[],
  keyHash: Buffer | string,
): Promise<Principal | undefined> {
  const hash = typeof keyHash === 'string' ? Buffer.from(keyHash, 'hex') : keyHash;
  if (hash.length !== 32) return undefined;
  const hashes = hashesOf(configured);
  for (let i = 0; i < configured.length; i++) {
    const entry = configured[i] as ConfiguredKey;
    if (timingSafeEqual(hash, hashes[i] as Buffer)) return { businessId: entry.businessId, mode: entry.mode };
  }
  const row = await db
    .selectFrom('api_keys')
    .select(['business_id', 'mode'])
    .where('key_hash', '=', hash.toString('hex'))
    .executeTakeFirst();
  return row ? { businessId: row.business_id, mode: row.mode } : undefined;
}
