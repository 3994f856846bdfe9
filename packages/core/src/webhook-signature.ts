// Standard Webhooks signatures (https://www.standardwebhooks.com): beside the service's checksum,
// a signature keyed by a strong per-business secret, over the event's id, a timestamp and the exact
// body bytes. docs/decisions.md, "Signatures beside the checksum".
import { type DigestPath, digestPath, type Match, nodePath } from './digest-path.js';
import { parseSigningPublicKey, type SigningPublicKey } from './ed25519.js';
import { PayhookError } from './errors.js';
import { hmac } from './hmac.js';
import { type CryptoPath, nodeCrypto, requireNodeCrypto } from './platform.js';
import {
  isTimestampText,
  listSignatures,
  signaturesOf,
  signedContent,
  signedHead,
} from './signature-wire.js';
import { parseSigningSecret, type SigningKey } from './signing-secret.js';

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

/** The secrets read: the same array when none is text (a receiver's, read once), else a new one. */
const keysOf = (secrets: readonly (string | SigningKey)[]): readonly SigningKey[] => {
  for (let k = 0; k < secrets.length; k++) {
    if (typeof secrets[k] === 'string') {
      return secrets.map((s) => (typeof s === 'string' ? parseSigningSecret(s) : s));
    }
  }
  return secrets as readonly SigningKey[];
};

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

const fail = (code: 'invalid_signature' | 'signature_timestamp_out_of_tolerance', message: string) =>
  ({ ok: false, error: new PayhookError(code, message) }) as const;

/** The headers' id, timestamp and signature list, checked; or the failure to answer. */
type Prechecked =
  | { id: string; timestamp: string; seconds: number; signature: string; failure?: undefined }
  | { failure: SignatureResult };

/** Checks the headers' presence and the timestamp's form and tolerance (before any key). */
function precheck(received: ReceivedSignature, options: VerifySignatureOptions): Prechecked {
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
function noMatch(options: VerifySignatureOptions, listedV1: number, listedV1a: number): SignatureResult {
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
const matched = (
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

type Checked = Exclude<Prechecked, { failure: SignatureResult }>;
type Verdict = SignatureResult | Promise<SignatureResult>;

/**
 * The one verification of Standard Webhooks headers, on either crypto path (digest-path.ts): the
 * timestamp within the tolerance (both directions), then every configured secret against every
 * listed `v1` signature, then, if none matched, every configured public key against every listed
 * `v1a` signature. At once on node:crypto, with no closure made; at once or as a promise on the
 * Web path. Throws a TypeError for a secret or public key that cannot be read.
 */
export function checkSignature(
  received: ReceivedSignature,
  body: string | Uint8Array,
  options: VerifySignatureOptions,
  path: DigestPath,
): Verdict {
  const checked = precheck(received, options);
  if (checked.failure) return checked.failure;
  const { signature } = checked;
  const head = signedHead(checked.id, checked.timestamp);
  const secrets = options.secrets ?? [];
  const listedV1 = listSignatures(signature, 'v1');
  const found: Match =
    secrets.length > 0 ? path.matchListed(keysOf(secrets), head, body, signature, listedV1) : -1;
  if (typeof found === 'number') return afterV1(checked, found, listedV1, body, options, path);
  // v1a reads the body after the await: bytes their owner may reuse once this call returns are
  // copied now (a Buffer's slice() would be a view of them).
  const held =
    typeof body !== 'string' && (options.publicKeys?.length ?? 0) > 0 ? new Uint8Array(body) : body;
  return found.then((index) => afterV1(checked, index, listedV1, held, options, path));
}

function afterV1(
  checked: Checked,
  found: number,
  listedV1: number,
  body: string | Uint8Array,
  options: VerifySignatureOptions,
  path: DigestPath,
): Verdict {
  if (found >= 0) return matched(checked, 'v1', found);
  const { publicKeys } = options;
  if (publicKeys === undefined || publicKeys.length === 0) return noMatch(options, listedV1, 0);
  const signatures = signaturesOf(checked.signature, 'v1a');
  const content = signedContent(checked.id, checked.timestamp, body);
  const index = path.matchV1a(publicKeysOf(publicKeys), signatures, content);
  return typeof index === 'number'
    ? afterV1a(checked, index, listedV1, signatures.length, options)
    : index.then((i) => afterV1a(checked, i, listedV1, signatures.length, options));
}

const afterV1a = (
  checked: Checked,
  found: number,
  listedV1: number,
  listedV1a: number,
  options: VerifySignatureOptions,
): SignatureResult => (found >= 0 ? matched(checked, 'v1a', found) : noMatch(options, listedV1, listedV1a));

/**
 * Verifies Standard Webhooks headers against the exact body: the timestamp within the tolerance
 * (both directions), then every configured secret against every listed `v1` signature, compared
 * in constant time, and every configured public key against every listed `v1a` (Ed25519)
 * signature. Missing headers are `invalid_signature` here; a receiver with keys refuses a request
 * without them as `signature_required`, unless it has `allowUnsigned`. Synchronous, on node:crypto; where it is
 * missing (browsers, Workers) use {@link verifyWebhookSignatureAsync}.
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
  return checkSignature(received, body, options, nodePath) as SignatureResult;
}

/** Options of {@link verifyWebhookSignatureAsync}. */
export interface VerifySignatureAsyncOptions extends VerifySignatureOptions {
  /**
   * `auto` (default): node:crypto where the runtime has it, else the Web path (a JavaScript HMAC
   * for bodies up to 12 KB, Web Crypto above and for Ed25519). `web` forces the Web path (to try it
   * on Node), `node` requires node:crypto.
   */
  crypto?: CryptoPath | undefined;
}

/**
 * {@link verifyWebhookSignature} on every runtime: on the Web path where node:crypto is missing
 * (browsers, Workers without nodejs_compat), where HMAC signatures are computed in JavaScript for a
 * body up to 12 KB and by `crypto.subtle` above, compared in constant time either way; on Node
 * with node:crypto. The same flow, the same verdicts, the same errors.
 *
 * @example
 * ```ts
 * const result = await verifyWebhookSignatureAsync(readSignatureHeaders(headers), rawBody, {
 *   publicKeys: ['whpk_...'],
 * });
 * if (!result.ok) return new Response(JSON.stringify(result.error), { status: result.error.status });
 * ```
 */
export async function verifyWebhookSignatureAsync(
  received: ReceivedSignature,
  body: string | Uint8Array,
  options: VerifySignatureAsyncOptions,
): Promise<SignatureResult> {
  return checkSignature(received, body, options, digestPath(options.crypto));
}
