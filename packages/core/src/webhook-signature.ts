// Standard Webhooks signatures (https://www.standardwebhooks.com): beside the service's checksum,
// a signature keyed by a strong per-business secret, over the event's id, a timestamp and the exact
// body bytes. docs/decisions.md, "Signatures beside the checksum".
import { allocBytes, base64Of, bytesOfBase64, joinBytes } from './bytes.js';
import { listV1aSignatures, matchV1a, parseSigningPublicKey, type SigningPublicKey } from './ed25519.js';
import { PayhookError } from './errors.js';
import { hmac } from './hmac.js';
import { nodeCrypto, requireNodeCrypto } from './platform.js';

/** The prefix of a signing secret; the rest is the key in base64. */
export const SIGNING_SECRET_PREFIX = 'whsec_';
/** The fewest key bytes a signing secret may have (Svix's secrets have 24). */
export const MIN_SIGNING_SECRET_BYTES = 24;
/** How far a signature's timestamp may be from the receiver's clock, either way (default 5 minutes). */
export const DEFAULT_SIGNATURE_TOLERANCE_SECONDS = 300;

/**
 * The three Standard Webhooks headers, lower-case as Node gives them. A type (not an interface) so
 * that it can be passed where a header record is expected.
 */
export type WebhookSignatureHeaders = {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
};

/** The signature headers of a request as received: any may be missing. */
export interface ReceivedSignature {
  id: string | undefined;
  timestamp: string | undefined;
  signature: string | undefined;
}

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

const keysOf = (secrets: readonly (string | SigningKey)[]): SigningKey[] =>
  secrets.map((s) => (typeof s === 'string' ? parseSigningSecret(s) : s));

/**
 * Whether a `webhook-timestamp` is whole seconds as Standard Webhooks writes them: 1 to 12 ASCII
 * digits (a loop: the regular expression it replaces cost more than the comparison it guards).
 */
export function isTimestampText(timestamp: string): boolean {
  if (timestamp.length === 0 || timestamp.length > 12) return false;
  for (let k = 0; k < timestamp.length; k++) {
    const c = timestamp.charCodeAt(k);
    if (c < 0x30 || c > 0x39) return false;
  }
  return true;
}

/** What the signed content holds before the body: `id.timestamp.`. */
export const signedHead = (id: string, timestamp: string): string => `${id}.${timestamp}.`;

/** The HMAC-SHA256 of `id.timestamp.body` under `key`: the bytes a `v1,` signature carries. */
export function signatureDigest(
  key: Uint8Array,
  id: string,
  timestamp: string,
  body: string | Uint8Array,
): Uint8Array {
  return hmac(key, signedHead(id, timestamp), body, 'buffer');
}

/** Options of {@link signWebhook}. */
export interface SignWebhookInput {
  /** The event's id: the same for every attempt, so receivers can tell a retry. */
  id: string;
  /** The exact body bytes sent. */
  body: string | Uint8Array;
  /** Every secret to sign with (during a rotation, the new and the previous one). */
  secrets: readonly (string | SigningKey)[];
  /** Seconds since the epoch (default: now). */
  timestamp?: number;
}

/**
 * The Standard Webhooks headers of one request: `webhook-id`, `webhook-timestamp` and
 * `webhook-signature` with one `v1,<base64>` per secret, space-separated. Costs one HMAC per secret.
 *
 * @example
 * ```ts
 * const headers = signWebhook({ id: event.id, body, secrets: ['whsec_...'] });
 * await fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
 * ```
 */
export function signWebhook(input: SignWebhookInput): WebhookSignatureHeaders {
  if (nodeCrypto === undefined) requireNodeCrypto('signWebhook');
  const { id, body } = input;
  if (typeof id !== 'string' || id.length === 0) {
    throw new TypeError('Invalid webhook id: a non-empty string.');
  }
  const keys = keysOf(input.secrets);
  if (keys.length === 0) throw new TypeError('signWebhook needs at least one secret.');
  const timestamp = String(input.timestamp ?? Math.floor(Date.now() / 1000));
  if (!isTimestampText(timestamp)) throw new TypeError(`Invalid timestamp: ${timestamp} (whole seconds).`);
  const head = signedHead(id, timestamp);
  let signature = '';
  for (const { key } of keys) {
    signature += `${signature ? ' ' : ''}v1,${hmac(key, head, body, 'base64')}`;
  }
  return { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': signature };
}

type HeaderValue = string | readonly string[] | undefined;

const single = (value: HeaderValue): string | undefined =>
  typeof value === 'string' ? value : Array.isArray(value) ? (value as string[]).join(' ') : undefined;

/**
 * The signature headers of a request, from Node's lower-case header object. The `svix-` names
 * are read when the `webhook-` ones are absent, as Svix's own libraries do.
 */
export function readSignatureHeaders(headers: Readonly<Record<string, HeaderValue>>): ReceivedSignature {
  return {
    id: single(headers['webhook-id'] ?? headers['svix-id']),
    timestamp: single(headers['webhook-timestamp'] ?? headers['svix-timestamp']),
    signature: single(headers['webhook-signature'] ?? headers['svix-signature']),
  };
}

/** Options of {@link verifyWebhookSignature}. */
export interface VerifySignatureOptions {
  /**
   * The `whsec_` secrets this receiver accepts for `v1` (HMAC) signatures (during a rotation, the
   * new and the previous one).
   */
  secrets?: readonly (string | SigningKey)[] | undefined;
  /**
   * The `whpk_` Ed25519 public keys this receiver accepts for `v1a` signatures (during a rotation,
   * several). With `secrets` too, a signature under either passes.
   */
  publicKeys?: readonly (string | SigningPublicKey)[] | undefined;
  /** Largest distance between the timestamp and `now`, either way, in seconds (default 300). */
  toleranceSeconds?: number;
  /** The receiver's clock, in ms (default `Date.now()`). */
  now?: number;
}

/** A signature that verified. */
export interface SignatureSuccess {
  ok: true;
  id: string;
  timestamp: number;
  /** `v1` (HMAC-SHA256 under a secret) or `v1a` (Ed25519 under a public key). */
  scheme: 'v1' | 'v1a';
  /** Which configured secret matched (`v1`), else -1. */
  secretIndex: number;
  /** Which configured public key matched (`v1a`), else -1. */
  publicKeyIndex: number;
}

/** What {@link verifyWebhookSignature} found. */
export type SignatureResult = SignatureSuccess | { ok: false; error: PayhookError };

/** Bytes of a `v1` (HMAC-SHA256) signature. */
export const SIGNATURE_BYTES = 32;
const fail = (code: 'invalid_signature' | 'signature_timestamp_out_of_tolerance', message: string) =>
  ({ ok: false, error: new PayhookError(code, message) }) as const;

/** The most signatures read from one header: more is not from a sender with a few secrets in rotation. */
export const MAX_LISTED = 16;
// Where the listed signatures' base64 texts are in the header, as [from, to) pairs, and two
// buffers to decode a pair of signatures into: kept between calls (verifying is synchronous).
const listed = new Int32Array(2 * MAX_LISTED);
// Buffers only where Node's are (this path runs only there).
const decodedListed = nodeCrypto ? (allocBytes(SIGNATURE_BYTES) as Buffer) : undefined;
const decodedExpected = nodeCrypto ? (allocBytes(SIGNATURE_BYTES) as Buffer) : undefined;

/**
 * Finds the `v1` signatures of the right length (32 bytes of base64, padded or not) a header
 * lists, at most {@link MAX_LISTED}, and notes where they are in `listed`; returns how many. The
 * header is walked by index: splitting it and decoding each signature into a Buffer cost a tenth
 * of a 1 KB verify.
 */
function listSignatures(header: string): number {
  let count = 0;
  for (let from = 0; from <= header.length && count < MAX_LISTED; ) {
    let to = header.indexOf(' ', from);
    if (to === -1) to = header.length;
    if (header.startsWith('v1,', from)) {
      // Buffer.byteLength's count for base64: padding does not count.
      let n = to - from - 3;
      if (n > 0 && header.charCodeAt(to - 1) === 0x3d) n--;
      if (n > 1 && header.charCodeAt(to - 2) === 0x3d) n--;
      if ((n * 3) >>> 2 === SIGNATURE_BYTES) {
        listed[2 * count] = from + 3;
        listed[2 * count + 1] = to;
        count++;
      }
    }
    from = to + 1;
  }
  return count;
}

/**
 * Whether the base64 text at [from, to) of `header` decodes to the bytes `expected` (canonical
 * base64 of 32 bytes) stands for. Compared as text first, every character whatever the first
 * difference (as the Standard Webhooks libraries compare); a text that differs may still be the
 * same bytes spelled otherwise (unpadded, URL-safe), so it is then decoded and compared as bytes
 * in constant time.
 */
function signatureMatches(header: string, from: number, to: number, expected: string): boolean {
  if (to - from === expected.length) {
    let difference = 0;
    for (let k = 0; k < expected.length; k++)
      difference |= expected.charCodeAt(k) ^ header.charCodeAt(from + k);
    if (difference === 0) return true;
  }
  const listedBytes = decodedListed as Buffer;
  const expectedBytes = decodedExpected as Buffer;
  if (listedBytes.write(header.slice(from, to), 'base64') !== SIGNATURE_BYTES) return false;
  expectedBytes.write(expected, 'base64');
  return (nodeCrypto as NonNullable<typeof nodeCrypto>).timingSafeEqual(listedBytes, expectedBytes);
}

/** The headers' id, timestamp and signature list, checked; or the failure to answer. */
export type Prechecked =
  | { id: string; timestamp: string; seconds: number; signature: string; failure?: undefined }
  | { failure: SignatureResult };

/** Checks the headers' presence and the timestamp's form and tolerance (before any key). */
export function precheck(received: ReceivedSignature, options: VerifySignatureOptions): Prechecked {
  const { id, timestamp, signature } = received;
  if (!id || !timestamp || !signature) {
    return {
      failure: fail(
        'invalid_signature',
        'The signature headers are incomplete: webhook-id, webhook-timestamp and webhook-signature go together.',
      ),
    };
  }
  if (!isTimestampText(timestamp)) {
    return { failure: fail('invalid_signature', 'webhook-timestamp is not a whole number of seconds.') };
  }
  const tolerance = options.toleranceSeconds ?? DEFAULT_SIGNATURE_TOLERANCE_SECONDS;
  const seconds = Number(timestamp);
  const now = (options.now ?? Date.now()) / 1000;
  if (Math.abs(now - seconds) > tolerance) {
    return {
      failure: fail(
        'signature_timestamp_out_of_tolerance',
        `webhook-timestamp is ${Math.round(now - seconds)} s from this receiver's clock; at most ${tolerance} s either way is accepted (a replay, or a clock to set right).`,
      ),
    };
  }
  return { id, timestamp, seconds, signature };
}

/** The configured public keys, read. */
export const publicKeysOf = (keys: VerifySignatureOptions['publicKeys']): SigningPublicKey[] =>
  (keys ?? []).map((k) => (typeof k === 'string' ? parseSigningPublicKey(k) : k));

/** The failure when no configured key verified any listed signature. */
export function noMatch(
  options: VerifySignatureOptions,
  listedV1: number,
  listedV1a: number,
): SignatureResult {
  const v1 = (options.secrets?.length ?? 0) > 0;
  const v1a = (options.publicKeys?.length ?? 0) > 0;
  const wanted = v1 && v1a ? 'v1 or v1a' : v1a ? 'v1a' : 'v1';
  const listed = (v1 ? listedV1 : 0) + (v1a ? listedV1a : 0);
  return fail(
    'invalid_signature',
    listed === 0
      ? `webhook-signature lists no ${wanted} signature.`
      : `No webhook-signature matches a configured ${v1 && v1a ? 'signing secret or public key' : v1a ? 'signing public key' : 'signing secret'}.`,
  );
}

/** The success of the `scheme` key at `index`. */
export const matched = (
  checked: { id: string; seconds: number },
  scheme: 'v1' | 'v1a',
  index: number,
): SignatureSuccess => ({
  ok: true,
  id: checked.id,
  timestamp: checked.seconds,
  scheme,
  secretIndex: scheme === 'v1' ? index : -1,
  publicKeyIndex: scheme === 'v1a' ? index : -1,
});

/**
 * Verifies Standard Webhooks headers against the exact body: the timestamp within the tolerance
 * (both directions), then every configured secret against every listed `v1` signature, compared
 * in constant time, and every configured public key against every listed `v1a` (Ed25519)
 * signature. Missing headers are `invalid_signature` here; a receiver with keys refuses a request
 * without them as `signature_required`, unless it has `allowUnsigned`. Synchronous, on node:crypto; where it is
 * missing (browsers, Workers) use `verifyWebhookSignatureAsync`.
 *
 * @example
 * ```ts
 * const result = verifyWebhookSignature(readSignatureHeaders(req.headers), rawBody, { secrets: ['whsec_...'] });
 * if (!result.ok) return res.status(result.error.status).json(result.error);
 * ```
 */
export function verifyWebhookSignature(
  received: ReceivedSignature,
  body: string | Uint8Array,
  options: VerifySignatureOptions,
): SignatureResult {
  if (nodeCrypto === undefined) requireNodeCrypto('verifyWebhookSignature');
  const checked = precheck(received, options);
  if (checked.failure) return checked.failure;
  const { id, timestamp, signature } = checked;
  const secrets = options.secrets ?? [];
  const count = listSignatures(signature);
  const head = signedHead(id, timestamp);
  let found = -1;
  // Every pair is compared, so the time taken says nothing about which one matched.
  for (let k = 0; k < secrets.length; k++) {
    const secret = secrets[k] as string | SigningKey;
    const key = typeof secret === 'string' ? parseSigningSecret(secret).key : secret.key;
    const expected = hmac(key, head, body, 'base64');
    for (let j = 0; j < count; j++) {
      const from = listed[2 * j] as number;
      if (signatureMatches(signature, from, listed[2 * j + 1] as number, expected) && found < 0) found = k;
    }
  }
  if (found >= 0) return matched(checked, 'v1', found);
  let listedV1a = 0;
  if (options.publicKeys !== undefined && options.publicKeys.length > 0) {
    const signatures = listV1aSignatures(signature, MAX_LISTED);
    listedV1a = signatures.length;
    found = matchV1a(publicKeysOf(options.publicKeys), signatures, joinBytes(head, body));
    if (found >= 0) return matched(checked, 'v1a', found);
  }
  return noMatch(options, count, listedV1a);
}
