// Standard Webhooks asymmetric signatures: `v1a,<base64 Ed25519 signature>` over
// `id.timestamp.body`, with a `whsk_` secret key (the sender's) and a `whpk_` public key (all a
// receiver holds: it can verify and cannot sign). docs/decisions.md, "Ed25519 signatures (v1a)".
import { base64Of, bytesOfBase64 } from './bytes.js';
import { type NodeCrypto, requireNodeCrypto, requireSubtle, type WebCryptoKey } from './platform.js';
import { isTimestampText, signedContent } from './signature-wire.js';

export { ED25519_SIGNATURE_BYTES } from './signature-wire.js';

/** The prefix of an Ed25519 public key; the rest is the base64 of its 32 raw bytes. */
export const SIGNING_PUBLIC_KEY_PREFIX = 'whpk_';
/** The prefix of an Ed25519 secret key; the rest is the base64 of its 32-byte seed. */
export const SIGNING_SECRET_KEY_PREFIX = 'whsk_';

/** A `whsk_` secret key and the `whpk_` public key that goes with it. */
export interface SigningKeyPair {
  /** `whsk_` and the base64 of the 32-byte Ed25519 seed (RFC 8032's private key). Keep it secret. */
  secretKey: string;
  /** `whpk_` and the base64 of the 32-byte Ed25519 public key: what a receiver is given. */
  publicKey: string;
}

/** A `whpk_` public key as a receiver holds it: its text and its 32 raw bytes. */
export interface SigningPublicKey {
  /** The key as configured (`whpk_...`). */
  publicKey: string;
  key: Uint8Array;
}

/** A `whsk_` secret key read: its text, its 32-byte seed and the raw public key. */
export interface SigningSecretKey {
  /** The key as configured (`whsk_...`). */
  secretKey: string;
  seed: Uint8Array;
  /** The raw public key, when the secret key carried it (the 64-byte form); else derived on use. */
  publicKey: Uint8Array | undefined;
}

// DER prefixes of an Ed25519 public key (SPKI) and private key (PKCS #8), followed by the 32 bytes.
const SPKI_PREFIX = [0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00];
const PKCS8_PREFIX = [
  0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

const der = (prefix: readonly number[], key: Uint8Array): Uint8Array => {
  const out = new Uint8Array(prefix.length + key.length);
  out.set(prefix, 0);
  out.set(key, prefix.length);
  return out;
};

function readPrefixed(text: unknown, prefix: string, what: string, sizes: readonly number[]): Uint8Array {
  if (typeof text !== 'string' || !text.startsWith(prefix)) {
    throw new TypeError(`Invalid ${what}: expected "${prefix}" followed by base64.`);
  }
  const bytes = bytesOfBase64(text.slice(prefix.length));
  if (bytes === undefined) throw new TypeError(`Invalid ${what}: the part after "${prefix}" is not base64.`);
  if (!sizes.includes(bytes.length)) {
    throw new TypeError(
      `Invalid ${what}: ${bytes.length} bytes of key, an Ed25519 key has ${sizes.join(' or ')}.`,
    );
  }
  return bytes;
}

/**
 * Reads a `whpk_` public key; throws a TypeError naming what is wrong. The base64 is standard
 * (`+/`, padded or not) or URL-safe.
 *
 * @example
 * ```ts
 * const key = parseSigningPublicKey('whpk_MCowBQYDK2VwAyEA...'); // key.key: 32 bytes
 * ```
 */
export function parseSigningPublicKey(publicKey: string): SigningPublicKey {
  return { publicKey, key: readPrefixed(publicKey, SIGNING_PUBLIC_KEY_PREFIX, 'signing public key', [32]) };
}

/**
 * Reads a `whsk_` secret key: the base64 of the 32-byte seed, or of the 64-byte form some
 * libraries write (seed then public key). Throws a TypeError naming what is wrong, never the key.
 */
export function parseSigningSecretKey(secretKey: string): SigningSecretKey {
  const bytes = readPrefixed(secretKey, SIGNING_SECRET_KEY_PREFIX, 'signing secret key', [32, 64]);
  return {
    secretKey,
    seed: bytes.subarray(0, 32),
    publicKey: bytes.length === 64 ? bytes.subarray(32) : undefined,
  };
}

const secretKeyOf = (key: string | SigningSecretKey): SigningSecretKey =>
  typeof key === 'string' ? parseSigningSecretKey(key) : key;

// Keys made once per key bytes, for as long as those bytes live.
const nodePublic = new WeakMap<Uint8Array, ReturnType<NodeCrypto['createPublicKey']>>();
const nodePrivate = new WeakMap<Uint8Array, ReturnType<NodeCrypto['createPrivateKey']>>();
const webPublic = new WeakMap<Uint8Array, Promise<WebCryptoKey>>();
const webPrivate = new WeakMap<Uint8Array, Promise<WebCryptoKey>>();

/** The value kept in `cache` for `key`, made by `make` the first time. */
function kept<V>(cache: WeakMap<Uint8Array, V>, key: Uint8Array, make: () => V): V {
  let value = cache.get(key);
  if (value === undefined) {
    value = make();
    cache.set(key, value);
  }
  return value;
}

const nodePublicKey = (c: NodeCrypto, key: Uint8Array) =>
  kept(nodePublic, key, () =>
    c.createPublicKey({ key: der(SPKI_PREFIX, key) as Buffer, format: 'der', type: 'spki' }),
  );

const nodePrivateKey = (c: NodeCrypto, seed: Uint8Array) =>
  kept(nodePrivate, seed, () =>
    c.createPrivateKey({ key: der(PKCS8_PREFIX, seed) as Buffer, format: 'der', type: 'pkcs8' }),
  );

const webPublicKey = (key: Uint8Array): Promise<WebCryptoKey> =>
  kept(webPublic, key, () => requireSubtle().importKey('raw', key, { name: 'Ed25519' }, false, ['verify']));

const webPrivateKey = (seed: Uint8Array): Promise<WebCryptoKey> =>
  kept(webPrivate, seed, () =>
    requireSubtle().importKey('pkcs8', der(PKCS8_PREFIX, seed), { name: 'Ed25519' }, false, ['sign']),
  );

/**
 * A new Ed25519 key pair for `v1a` signatures: the sender keeps `secretKey`, the receiver is given
 * `publicKey` (`createReceiver({ signingPublicKeys: [publicKey] })`). Synchronous, on node:crypto.
 *
 * @example
 * ```ts
 * const { secretKey, publicKey } = generateSigningKeyPair();
 * // secretKey: 'whsk_…' (keep it secret), publicKey: 'whpk_…' (give it to the receiver)
 * ```
 */
export function generateSigningKeyPair(): SigningKeyPair {
  const c = requireNodeCrypto('generateSigningKeyPair');
  const { publicKey, privateKey } = c.generateKeyPairSync('ed25519');
  const spki = publicKey.export({ format: 'der', type: 'spki' });
  const pkcs8 = privateKey.export({ format: 'der', type: 'pkcs8' });
  return {
    secretKey: SIGNING_SECRET_KEY_PREFIX + base64Of(pkcs8.subarray(PKCS8_PREFIX.length)),
    publicKey: SIGNING_PUBLIC_KEY_PREFIX + base64Of(spki.subarray(SPKI_PREFIX.length)),
  };
}

/**
 * {@link generateSigningKeyPair} on Web Crypto: works on every runtime that has `crypto.subtle`.
 *
 * @deprecated Keys are made where the sender runs, on Node: use {@link generateSigningKeyPair}.
 * Removed in the next major version.
 */
export async function generateSigningKeyPairAsync(): Promise<SigningKeyPair> {
  const subtle = requireSubtle();
  const pair = (await subtle.generateKey({ name: 'Ed25519' }, true, ['sign', 'verify'])) as {
    privateKey: WebCryptoKey;
    publicKey: WebCryptoKey;
  };
  const pkcs8 = new Uint8Array(await subtle.exportKey('pkcs8', pair.privateKey));
  const raw = new Uint8Array(await subtle.exportKey('raw', pair.publicKey));
  return {
    secretKey: SIGNING_SECRET_KEY_PREFIX + base64Of(pkcs8.subarray(PKCS8_PREFIX.length)),
    publicKey: SIGNING_PUBLIC_KEY_PREFIX + base64Of(raw),
  };
}

/**
 * The `whpk_` public key of a `whsk_` secret key (to show a business the key its receiver needs).
 * Synchronous, on node:crypto.
 */
export function signingPublicKeyOf(secretKey: string | SigningSecretKey): string {
  const key = secretKeyOf(secretKey);
  const c = requireNodeCrypto('signingPublicKeyOf');
  const derived = new Uint8Array(
    c.createPublicKey(nodePrivateKey(c, key.seed)).export({ format: 'der', type: 'spki' }),
  ).subarray(SPKI_PREFIX.length);
  if (key.publicKey !== undefined && base64Of(key.publicKey) !== base64Of(derived)) {
    throw new TypeError('Invalid signing secret key: its public half does not belong to its seed.');
  }
  return SIGNING_PUBLIC_KEY_PREFIX + base64Of(derived);
}

/**
 * {@link signingPublicKeyOf} on Web Crypto.
 *
 * @deprecated The sender, on Node, shows a business its public key: use
 * {@link signingPublicKeyOf}. Removed in the next major version.
 */
export async function signingPublicKeyOfAsync(secretKey: string | SigningSecretKey): Promise<string> {
  const key = secretKeyOf(secretKey);
  const subtle = requireSubtle();
  // Web Crypto derives the public key when the private key is exported as a JWK.
  const extractable = await subtle.importKey(
    'pkcs8',
    der(PKCS8_PREFIX, key.seed),
    { name: 'Ed25519' },
    true,
    ['sign'],
  );
  const jwk = await subtle.exportKey('jwk', extractable);
  const derived = bytesOfBase64(jwk.x ?? '');
  if (derived === undefined) throw new TypeError('Web Crypto gave no public key for this secret key.');
  if (key.publicKey !== undefined && base64Of(key.publicKey) !== base64Of(derived)) {
    throw new TypeError('Invalid signing secret key: its public half does not belong to its seed.');
  }
  return SIGNING_PUBLIC_KEY_PREFIX + base64Of(derived);
}

/**
 * One `v1a,<base64>` signature of `id.timestamp.body` under a `whsk_` secret key: an entry of the
 * `webhook-signature` header, which lists entries separated by spaces (a `v1,` HMAC signature may
 * sit beside it). Synchronous, on node:crypto.
 *
 * @example
 * ```ts
 * const entry = signV1a('whsk_…', 'evt_1', '1700000000', body); // 'v1a,hnO3f9T8…=='
 * ```
 */
export function signV1a(
  secretKey: string | SigningSecretKey,
  id: string,
  timestamp: string,
  body: string | Uint8Array,
): string {
  const key = secretKeyOf(secretKey);
  const c = requireNodeCrypto('signV1a');
  return `v1a,${base64Of(c.sign(null, signedContent(id, timestamp, body), nodePrivateKey(c, key.seed)))}`;
}

/**
 * {@link signV1a} on Web Crypto.
 *
 * @deprecated Signing is the sender's, which runs on Node: use {@link signV1a}. Removed in the
 * next major version.
 */
export async function signV1aAsync(
  secretKey: string | SigningSecretKey,
  id: string,
  timestamp: string,
  body: string | Uint8Array,
): Promise<string> {
  const key = secretKeyOf(secretKey);
  const signature = await requireSubtle().sign(
    'Ed25519',
    await webPrivateKey(key.seed),
    signedContent(id, timestamp, body),
  );
  return `v1a,${base64Of(new Uint8Array(signature))}`;
}

/** Input of {@link signWebhookV1a}. */
export interface SignWebhookV1aInput {
  /** The event's id: the same for every attempt, so receivers can tell a retry. */
  id: string;
  /** The exact body bytes sent. */
  body: string | Uint8Array;
  /** Every `whsk_` secret key to sign with (during a rotation, the new and the previous one). */
  secretKeys: readonly (string | SigningSecretKey)[];
  /** Seconds since the epoch (default: now). */
  timestamp?: number;
}

/** The three Standard Webhooks headers. */
export type V1aSignatureHeaders = {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
};

function headerParts(input: SignWebhookV1aInput, what: string) {
  const { id } = input;
  if (typeof id !== 'string' || id.length === 0)
    throw new TypeError('Invalid webhook id: a non-empty string.');
  if (!Array.isArray(input.secretKeys) || input.secretKeys.length === 0) {
    throw new TypeError(`${what} needs at least one secret key.`);
  }
  const keys = input.secretKeys.map(secretKeyOf);
  const timestamp = String(input.timestamp ?? Math.floor(Date.now() / 1000));
  if (!isTimestampText(timestamp)) throw new TypeError(`Invalid timestamp: ${timestamp} (whole seconds).`);
  return { id, keys, timestamp };
}

/**
 * The Standard Webhooks headers of one request signed with Ed25519: `webhook-signature` lists one
 * `v1a,<base64>` per secret key, space-separated. Synchronous, on node:crypto.
 *
 * @example
 * ```ts
 * const headers = signWebhookV1a({ id: event.id, body, secretKeys: ['whsk_…'] });
 * await fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
 * ```
 */
export function signWebhookV1a(input: SignWebhookV1aInput): V1aSignatureHeaders {
  const { id, keys, timestamp } = headerParts(input, 'signWebhookV1a');
  const signature = keys.map((key) => signV1a(key, id, timestamp, input.body)).join(' ');
  return { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': signature };
}

/**
 * {@link signWebhookV1a} on Web Crypto.
 *
 * @deprecated Signing is the sender's, which runs on Node: use {@link signWebhookV1a}. Removed in
 * the next major version.
 */
export async function signWebhookV1aAsync(input: SignWebhookV1aInput): Promise<V1aSignatureHeaders> {
  const { id, keys, timestamp } = headerParts(input, 'signWebhookV1aAsync');
  const entries = await Promise.all(keys.map((key) => signV1aAsync(key, id, timestamp, input.body)));
  return { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': entries.join(' ') };
}

/**
 * The index of the first public key under which one of `signatures` verifies `content` (the
 * signed bytes, `id.timestamp.body`), or -1. Synchronous, on node:crypto (digest-path.ts chooses).
 */
export function matchV1a(
  publicKeys: readonly SigningPublicKey[],
  signatures: readonly Uint8Array[],
  content: Uint8Array,
): number {
  if (signatures.length === 0 || publicKeys.length === 0) return -1;
  const c = requireNodeCrypto('matchV1a');
  for (let k = 0; k < publicKeys.length; k++) {
    const key = nodePublicKey(c, (publicKeys[k] as SigningPublicKey).key);
    for (const signature of signatures) if (c.verify(null, content, key, signature)) return k;
  }
  return -1;
}

/** {@link matchV1a} on Web Crypto. `content` must not change until the promise settles. */
export async function matchV1aAsync(
  publicKeys: readonly SigningPublicKey[],
  signatures: readonly Uint8Array[],
  content: Uint8Array,
): Promise<number> {
  if (signatures.length === 0 || publicKeys.length === 0) return -1;
  const subtle = requireSubtle();
  for (let k = 0; k < publicKeys.length; k++) {
    const key = await webPublicKey((publicKeys[k] as SigningPublicKey).key);
    for (const signature of signatures) {
      if (await subtle.verify('Ed25519', key, signature, content)) return k;
    }
  }
  return -1;
}
