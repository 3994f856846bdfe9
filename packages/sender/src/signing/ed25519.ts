// Standard Webhooks' asymmetric scheme, `v1a`: Ed25519 over "webhook-id.webhook-timestamp.body".
// The sender holds the `whsk_` secret key; a receiver is given only the `whpk_` public key, which
// verifies and cannot sign (docs/decisions.md, "Secrets per endpoint").
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject, sign } from 'node:crypto';

/** PKCS #8 DER of an Ed25519 private key, up to its 32-byte seed (RFC 8410). */
const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
/** SubjectPublicKeyInfo DER of an Ed25519 public key, up to its 32 bytes (RFC 8410). */
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

/** A v1a key pair as the API and the database hold it. */
export interface SigningKeyPair {
  /** `whsk_` and the base64 of the 32-byte seed: stays in the sender. */
  secretKey: string;
  /** `whpk_` and the base64 of the 32-byte public key: what receivers are given. */
  publicKey: string;
}

/**
 * A fresh Ed25519 key pair in Standard Webhooks' text form.
 *
 * @example
 * ```ts
 * const { secretKey, publicKey } = generateEd25519KeyPair(); // whsk_..., whpk_...
 * ```
 */
export function generateEd25519KeyPair(): SigningKeyPair {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const seed = privateKey.export({ format: 'der', type: 'pkcs8' }).subarray(PKCS8_PREFIX.length);
  const raw = publicKey.export({ format: 'der', type: 'spki' }).subarray(SPKI_PREFIX.length);
  return { secretKey: `whsk_${seed.toString('base64')}`, publicKey: `whpk_${raw.toString('base64')}` };
}

/**
 * The private key of a `whsk_` text: the base64 of a 32-byte seed, or of 64 bytes (the seed and
 * then its public key, as libsodium writes a secret key). Throws a TypeError on anything else.
 */
export function parseEd25519SecretKey(text: string): KeyObject {
  const bytes = text.startsWith('whsk_') ? Buffer.from(text.slice(5), 'base64') : Buffer.alloc(0);
  if (bytes.length !== 32 && bytes.length !== 64) {
    throw new TypeError('An Ed25519 secret key is "whsk_" and the base64 of 32 (or 64) bytes.');
  }
  return createPrivateKey({
    key: Buffer.concat([PKCS8_PREFIX, bytes.subarray(0, 32)]),
    format: 'der',
    type: 'pkcs8',
  });
}

/** The `whpk_` public key of a private key. */
export function ed25519PublicKeyText(key: KeyObject): string {
  const raw = createPublicKey(key).export({ format: 'der', type: 'spki' }).subarray(SPKI_PREFIX.length);
  return `whpk_${raw.toString('base64')}`;
}

/**
 * The `webhook-signature` value of one attempt under `v1a`: `v1a,<base64 Ed25519 signature>` per
 * key, space-separated, each over `${id}.${timestamp}.${body}` (the bytes HMAC signs under `v1`).
 *
 * @example
 * ```ts
 * const header = signV1a({ id: eventId, timestamp: 1767225600, body, keys: [parseEd25519SecretKey(whsk)] });
 * ```
 */
export function signV1a(input: {
  id: string;
  timestamp: number;
  body: string;
  keys: readonly KeyObject[];
}): string {
  const message = Buffer.from(`${input.id}.${input.timestamp}.${input.body}`, 'utf8');
  return input.keys.map((key) => `v1a,${sign(null, message, key).toString('base64')}`).join(' ');
}
