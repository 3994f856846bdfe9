import { base64Of, bytesOfBase64 } from './bytes.js';

// Standard Webhooks signing secrets (`whsec_` and the base64 of the key bytes): the key of a `v1`
// (HMAC-SHA256) signature, as the sender holds it and as a receiver is given it.

/** The prefix of a signing secret; the rest is the key in base64. */
export const SIGNING_SECRET_PREFIX = 'whsec_';
/** The fewest key bytes a signing secret may have (Svix's secrets have 24). */
export const MIN_SIGNING_SECRET_BYTES = 24;

/** A secret as a receiver or sender holds it: its text and its key bytes. */
export interface SigningKey {
  /** The secret as configured (`whsec_...`). */
  secret: string;
  key: Uint8Array;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * Reads a `whsec_` secret into its key bytes; throws a TypeError naming what is wrong (never the
 * secret itself). The base64 is standard (`+/`, padded or not), as Standard Webhooks and Svix write it.
 *
 * @example
 * ```ts
 * const key = parseSigningSecret(process.env.WEBHOOK_SECRET!); // 24+ bytes
 * ```
 */
export function parseSigningSecret(secret: string): SigningKey {
  if (typeof secret !== 'string' || !secret.startsWith(SIGNING_SECRET_PREFIX)) {
    throw new TypeError(
      `Invalid signing secret: expected "${SIGNING_SECRET_PREFIX}" followed by base64 (as the sender shows it).`,
    );
  }
  const encoded = secret.slice(SIGNING_SECRET_PREFIX.length);
  if (encoded.length % 4 === 1 || !BASE64.test(encoded)) {
    throw new TypeError(`Invalid signing secret: the part after "${SIGNING_SECRET_PREFIX}" is not base64.`);
  }
  const key = bytesOfBase64(encoded) as Uint8Array;
  if (key.length < MIN_SIGNING_SECRET_BYTES) {
    throw new TypeError(
      `Invalid signing secret: ${key.length} bytes of key, at least ${MIN_SIGNING_SECRET_BYTES} are needed.`,
    );
  }
  return { secret, key };
}

/**
 * A new signing secret: `whsec_` and the base64 of 32 random bytes.
 *
 * @example
 * ```ts
 * generateSigningSecret(); // 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw...'
 * ```
 */
export function generateSigningSecret(bytes = 32): string {
  if (!Number.isInteger(bytes) || bytes < MIN_SIGNING_SECRET_BYTES) {
    throw new TypeError(`A signing secret needs at least ${MIN_SIGNING_SECRET_BYTES} bytes.`);
  }
  return SIGNING_SECRET_PREFIX + base64Of(globalThis.crypto.getRandomValues(new Uint8Array(bytes)));
}
