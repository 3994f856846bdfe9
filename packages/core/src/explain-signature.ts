import { utf8Slice } from './bytes.js';
import { SIGNING_PUBLIC_KEY_PREFIX, type SigningPublicKey } from './ed25519.js';
import { isTimestampText, signaturesOf, signedHead } from './signature-wire.js';
import { parseSigningSecret, SIGNING_SECRET_PREFIX, type SigningKey } from './signing-secret.js';
import {
  DEFAULT_SIGNATURE_TOLERANCE_SECONDS,
  publicKeysOf,
  type ReceivedSignature,
  type VerifySignatureOptions,
} from './webhook-signature.js';

/**
 * For a human debugging a signature mismatch: the exact string signed (`id.timestamp.` and the
 * body's first characters), the `v1` signature each configured secret gives, whether each
 * configured public key verifies a listed `v1a` signature, and the signatures the request lists.
 * Secrets and keys are named by index and their first characters only.
 */
export interface SignatureExplanation {
  ok: boolean;
  /** The string each secret signed: `id.timestamp.body`, the body cut to 120 characters. */
  signedContent: string | undefined;
  listed: string[];
  secrets: { index: number; secretPrefix: string; expected: string; matches: boolean }[];
  /**
   * The `v1a` (Ed25519) public keys tried: a public key cannot make the signature, so each says
   * only whether some listed `v1a` signature verifies under it.
   */
  publicKeys: { index: number; keyPrefix: string; matches: boolean }[];
  /** The timestamp's distance from the clock, in seconds, and whether it is within the tolerance. */
  skewSeconds: number | undefined;
  withinTolerance: boolean | undefined;
  /** Why the headers could not be checked (missing or malformed). */
  problem?: string;
}

/** The signature checks an explanation shows, on node:crypto or on Web Crypto. */
export interface SignatureDigests {
  /** The base64 `v1` HMAC of `id.timestamp.body`. */
  signature(key: Uint8Array, id: string, timestamp: string, body: string | Uint8Array): string;
  /** Whether one of `signatures` verifies `id.timestamp.body` under `publicKey`. */
  v1a(
    publicKey: SigningPublicKey,
    signatures: Uint8Array[],
    id: string,
    timestamp: string,
    body: string | Uint8Array,
  ): boolean;
}

const prefixOf = (text: string, prefix: string) => `${text.slice(0, prefix.length + 4)}...`;

/** Builds a {@link SignatureExplanation} with `digests`; never throws on bad input. */
export function explainSignatureWith(
  received: ReceivedSignature,
  body: string | Uint8Array,
  options: VerifySignatureOptions,
  digests: SignatureDigests,
): SignatureExplanation {
  const { id, timestamp, signature } = received;
  const listed = signature ? signature.split(' ').filter(Boolean) : [];
  if (!id || !timestamp || !signature) {
    return {
      ok: false,
      signedContent: undefined,
      listed,
      secrets: [],
      publicKeys: [],
      skewSeconds: undefined,
      withinTolerance: undefined,
      problem: `missing header(s): ${[!id && 'webhook-id', !timestamp && 'webhook-timestamp', !signature && 'webhook-signature'].filter(Boolean).join(', ')}`,
    };
  }
  const text = typeof body === 'string' ? body : utf8Slice(body, 0, body.length);
  const skew = isTimestampText(timestamp)
    ? Math.round((options.now ?? Date.now()) / 1000 - Number(timestamp))
    : undefined;
  const tolerance = options.toleranceSeconds ?? DEFAULT_SIGNATURE_TOLERANCE_SECONDS;
  const secrets: SignatureExplanation['secrets'] = [];
  (options.secrets ?? []).forEach((s, index) => {
    let key: SigningKey;
    try {
      key = typeof s === 'string' ? parseSigningSecret(s) : s;
    } catch {
      secrets.push({ index, secretPrefix: '(invalid secret)', expected: '', matches: false });
      return;
    }
    const expected = `v1,${digests.signature(key.key, id, timestamp, body)}`;
    secrets.push({
      index,
      secretPrefix: prefixOf(key.secret, SIGNING_SECRET_PREFIX),
      expected,
      matches: listed.includes(expected),
    });
  });
  const v1a = signaturesOf(signature, 'v1a');
  const publicKeys: SignatureExplanation['publicKeys'] = [];
  (options.publicKeys ?? []).forEach((k, index) => {
    let key: SigningPublicKey;
    try {
      [key] = publicKeysOf([k]) as [SigningPublicKey];
    } catch {
      publicKeys.push({ index, keyPrefix: '(invalid public key)', matches: false });
      return;
    }
    publicKeys.push({
      index,
      keyPrefix: prefixOf(key.publicKey, SIGNING_PUBLIC_KEY_PREFIX),
      matches: digests.v1a(key, v1a, id, timestamp, body),
    });
  });
  const withinTolerance = skew === undefined ? undefined : Math.abs(skew) <= tolerance;
  return {
    ok: withinTolerance === true && [...secrets, ...publicKeys].some((s) => s.matches),
    signedContent: `${signedHead(id, timestamp)}${text.length > 120 ? `${text.slice(0, 120)}...` : text}`,
    listed,
    secrets,
    publicKeys,
    skewSeconds: skew,
    withinTolerance,
    ...(skew === undefined ? { problem: 'webhook-timestamp is not a whole number of seconds' } : {}),
  };
}

/**
 * A {@link SignatureExplanation} as lines for a terminal: the verdict, the string signed, the
 * timestamp's skew, the signatures listed, the one each secret gives and each public key's verdict.
 */
export function formatSignatureExplanation(s: SignatureExplanation): string {
  const lines = [s.ok ? 'The signature verifies.' : 'The signature does not verify.'];
  if (s.problem) lines.push(`  ${s.problem}`);
  if (s.signedContent !== undefined) lines.push(`  signed:   ${s.signedContent}`);
  if (s.skewSeconds !== undefined) {
    lines.push(
      `  timestamp: ${s.skewSeconds} s from this clock (${s.withinTolerance ? 'within' : 'OUTSIDE'} the tolerance)`,
    );
  }
  for (const listed of s.listed) lines.push(`  listed:   ${listed}`);
  for (const secret of s.secrets) {
    lines.push(
      `  ${secret.matches ? 'MATCH' : 'no match'}  secret #${secret.index + 1} (${secret.secretPrefix}) -> ${secret.expected}`,
    );
  }
  for (const key of s.publicKeys) {
    lines.push(
      `  ${key.matches ? 'MATCH' : 'no match'}  public key #${key.index + 1} (${key.keyPrefix}) -> ${key.matches ? 'verifies a listed v1a signature' : 'verifies no listed v1a signature'}`,
    );
  }
  return lines.join('\n');
}
