import {
  parseSigningSecret,
  parseSigningSecretKey,
  type SigningKey,
  type SigningSecretKey,
  signV1a,
  signWebhook,
  type WebhookSignatureHeaders,
} from '@payhook/core';
import type { Database } from '../db/database.js';
import { currentEndpointSecrets } from './endpoint-secrets.js';
import { currentSigningSecrets, type SecretOwner } from './secrets.js';

/** How long the secrets of a business are kept in memory before they are read again: 5 s. */
export const KEYRING_TTL_MS = 5000;

interface Entry {
  /** HMAC keys (v1), or Ed25519 private keys (v1a). */
  keys: { key: SigningKey | SigningSecretKey; expiresAt: number }[];
  scheme: 'v1' | 'v1a';
  loadedAt: number;
  loading?: Promise<Entry>;
}

/** The secrets every attempt signs with, read once per business every few seconds. */
export interface SigningKeyring {
  /**
   * The signature headers of one attempt, made now: `webhook-id` the event's id, the timestamp
   * the wall clock's (a receiver compares it with its own), one signature per valid secret. With
   * `endpointId`, an endpoint that has its own secrets is signed with them, in its scheme (`v1`
   * HMAC or `v1a` Ed25519); one that signs with the business's secrets, or no longer exists, is
   * signed with the business's.
   */
  sign(
    principal: SecretOwner,
    eventId: string,
    body: string,
    endpointId?: string | null,
  ): Promise<WebhookSignatureHeaders>;
  /** Forgets a business's secrets (after a rotation), so the next attempt reads them again. */
  invalidate(principal: SecretOwner): void;
  /** Forgets an endpoint's secrets (after a rotation). */
  invalidateEndpoint(endpointId: string): void;
}

const keyrings = new WeakMap<Database, SigningKeyring>();

/**
 * The keyring of a database: one per database object, shared by the API (which invalidates it on
 * a rotation) and the delivery worker of this process. Other instances see a rotation within
 * {@link KEYRING_TTL_MS}; the previous secret stays valid for the rotation's overlap, so a receiver
 * given the new secret accepts every attempt from the moment it is made.
 *
 * @example
 * ```ts
 * const headers = await signingKeyring(database).sign({ businessId, mode: 'test' }, event.id, body, new Date());
 * ```
 */
export function signingKeyring(database: Database): SigningKeyring {
  let keyring = keyrings.get(database);
  if (keyring) return keyring;
  const entries = new Map<string, Entry>();
  const id = (p: SecretOwner) => `${p.mode}:${p.businessId}`;

  /** An endpoint's own keys, or undefined when it signs with the business's (or is gone). */
  async function loadEndpoint(endpointId: string): Promise<Entry | undefined> {
    const endpoint = await database.delivery((db) =>
      db
        .selectFrom('webhook_endpoints')
        .select(['signature_scheme', 'account_secrets'])
        .where('id', '=', endpointId)
        .executeTakeFirst(),
    );
    if (!endpoint || endpoint.account_secrets) return undefined;
    const scheme = endpoint.signature_scheme;
    const rows = await database.delivery((db) => currentEndpointSecrets(db, endpointId, scheme));
    return {
      scheme,
      keys: rows.map((row) => ({
        key: scheme === 'v1a' ? parseSigningSecretKey(row.secret) : parseSigningSecret(row.secret),
        expiresAt: row.expires_at === null ? Number.POSITIVE_INFINITY : new Date(row.expires_at).getTime(),
      })),
      loadedAt: Date.now(),
    };
  }

  async function load(principal: SecretOwner): Promise<Entry> {
    const rows = await database.delivery((db) => currentSigningSecrets(db, principal));
    return {
      scheme: 'v1',
      keys: rows.map((row) => ({
        key: parseSigningSecret(row.secret),
        expiresAt: row.expires_at === null ? Number.POSITIVE_INFINITY : new Date(row.expires_at).getTime(),
      })),
      loadedAt: Date.now(),
    };
  }

  /** A cached entry under `key`, read again with `read` every {@link KEYRING_TTL_MS}. */
  function entry(key: string, read: () => Promise<Entry>): Entry | Promise<Entry> {
    const cached = entries.get(key);
    if (cached && Date.now() - cached.loadedAt < KEYRING_TTL_MS) return cached;
    if (cached?.loading) return cached.keys.length > 0 ? cached : cached.loading;
    const loading = read().then(
      (loaded) => {
        entries.set(key, loaded);
        return loaded;
      },
      (error: unknown) => {
        // The keys read before stay (and the next attempt tries the refresh again); without
        // them, the next attempt reads from scratch.
        if (entries.get(key)?.loading === loading) {
          if (cached && cached.keys.length > 0) entries.set(key, cached);
          else entries.delete(key);
        }
        throw error;
      },
    );
    // A refresh in the background, while attempts sign with the keys read before, may fail (the
    // database away): nobody waits on it then, and an unobserved rejection would end the process.
    // Callers that do wait on `loading` still see the error.
    loading.catch(() => {});
    entries.set(key, {
      keys: cached?.keys ?? [],
      scheme: cached?.scheme ?? 'v1',
      loadedAt: cached?.loadedAt ?? 0,
      loading,
    });
    // While a refresh runs, attempts sign with the secrets read before (if any).
    return cached && cached.keys.length > 0 ? { ...cached } : loading;
  }

  /** An endpoint with its own keys is cached with them; one without, as an empty entry. */
  const NO_KEYS = 'account';

  keyring = {
    async sign(principal, eventId, body, endpointId) {
      let own: Entry | undefined;
      if (endpointId) {
        const loaded = await entry(`endpoint:${endpointId}`, async () => {
          const keys = await loadEndpoint(endpointId);
          return keys ?? { keys: [], scheme: 'v1', loadedAt: Date.now(), [NO_KEYS]: true };
        });
        if (!(NO_KEYS in loaded)) own = loaded;
      }
      const { keys, scheme } = own ?? (await entry(id(principal), () => load(principal)));
      const now = Date.now();
      const valid = keys.filter((k) => k.expiresAt > now).map((k) => k.key);
      const timestamp = Math.floor(now / 1000);
      if (scheme === 'v1a') {
        return {
          'webhook-id': eventId,
          'webhook-timestamp': String(timestamp),
          // One `v1a,` entry per valid key, as `v1,` entries are during a rotation.
          'webhook-signature': (valid as SigningSecretKey[])
            .map((key) => signV1a(key, eventId, String(timestamp), body))
            .join(' '),
        };
      }
      return signWebhook({ id: eventId, body, secrets: valid as SigningKey[], timestamp });
    },
    invalidate(principal) {
      entries.delete(id(principal));
    },
    invalidateEndpoint(endpointId) {
      entries.delete(`endpoint:${endpointId}`);
    },
  };
  keyrings.set(database, keyring);
  return keyring;
}
