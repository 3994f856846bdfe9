import {
  parseSigningSecret,
  type SigningKey,
  signWebhook,
  type WebhookSignatureHeaders,
} from '@payhook/core';
import type { Database } from '../db/database.js';
import { ensureSigningSecret, type SecretOwner, validSigningSecrets } from './secrets.js';

/** How long the secrets of a business are kept in memory before they are read again: 5 s. */
export const KEYRING_TTL_MS = 5000;

interface Entry {
  keys: { key: SigningKey; expiresAt: number }[];
  loadedAt: number;
  loading?: Promise<Entry>;
}

/** The secrets every attempt signs with, read once per business every few seconds. */
export interface SigningKeyring {
  /**
   * The signature headers of one attempt, made now: `webhook-id` the event's id, the timestamp
   * the wall clock's (a receiver compares it with its own), one signature per valid secret.
   */
  sign(principal: SecretOwner, eventId: string, body: string): Promise<WebhookSignatureHeaders>;
  /** Forgets a business's secrets (after a rotation), so the next attempt reads them again. */
  invalidate(principal: SecretOwner): void;
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

  async function load(principal: SecretOwner): Promise<Entry> {
    let rows = await database.delivery((db) => validSigningSecrets(db, principal));
    if (!rows.some((row) => row.expires_at === null)) {
      // A business whose secret was never made (its key came from the configuration).
      await database.delivery((db) => ensureSigningSecret(db, principal));
      rows = await database.delivery((db) => validSigningSecrets(db, principal));
    }
    return {
      keys: rows.map((row) => ({
        key: parseSigningSecret(row.secret),
        expiresAt: row.expires_at === null ? Number.POSITIVE_INFINITY : new Date(row.expires_at).getTime(),
      })),
      loadedAt: Date.now(),
    };
  }

  function entry(principal: SecretOwner): Entry | Promise<Entry> {
    const key = id(principal);
    const cached = entries.get(key);
    if (cached && Date.now() - cached.loadedAt < KEYRING_TTL_MS) return cached;
    if (cached?.loading) return cached.keys.length > 0 ? cached : cached.loading;
    const loading = load(principal).then(
      (loaded) => {
        entries.set(key, loaded);
        return loaded;
      },
      (error: unknown) => {
        if (entries.get(key)?.loading === loading) entries.delete(key);
        throw error;
      },
    );
    entries.set(key, { keys: cached?.keys ?? [], loadedAt: cached?.loadedAt ?? 0, loading });
    // While a refresh runs, attempts sign with the secrets read before (if any).
    return cached && cached.keys.length > 0 ? { ...cached } : loading;
  }

  keyring = {
    async sign(principal, eventId, body) {
      const { keys } = await entry(principal);
      const now = Date.now();
      const valid = keys.filter((k) => k.expiresAt > now).map((k) => k.key);
      return signWebhook({ id: eventId, body, secrets: valid, timestamp: Math.floor(now / 1000) });
    },
    invalidate(principal) {
      entries.delete(id(principal));
    },
  };
  keyrings.set(database, keyring);
  return keyring;
}
