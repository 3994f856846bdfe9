import { bytesOfBase64, joinBytes } from './bytes.js';
import { listV1aSignatures, matchV1aAsync } from './ed25519.js';
import { firstMatchWeb } from './hmac-web.js';
import { type CryptoPath, resolveCryptoPath } from './platform.js';
import {
  MAX_LISTED,
  matched,
  noMatch,
  parseSigningSecret,
  precheck,
  publicKeysOf,
  type ReceivedSignature,
  SIGNATURE_BYTES,
  type SignatureResult,
  signedHead,
  type VerifySignatureOptions,
  verifyWebhookSignature,
} from './webhook-signature.js';

// Standard Webhooks verification on every runtime: the Web path where node:crypto is missing.

/** The `v1` signatures a header lists, decoded (32 bytes each), at most {@link MAX_LISTED}. */
function listV1Signatures(header: string): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (const entry of header.split(' ')) {
    if (out.length >= MAX_LISTED) break;
    if (!entry.startsWith('v1,')) continue;
    const bytes = bytesOfBase64(entry.slice(3));
    if (bytes !== undefined && bytes.length === SIGNATURE_BYTES) out.push(bytes);
  }
  return out;
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
 * body up to 12 KB and by `crypto.subtle` above, compared in constant time either way; on Node it
 * answers with the synchronous verdict. Same verdicts, same errors.
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
  if (resolveCryptoPath(options.crypto) === 'node') return verifyWebhookSignature(received, body, options);
  const checked = precheck(received, options);
  if (checked.failure) return checked.failure;
  const { id, timestamp, signature } = checked;
  const secrets = options.secrets ?? [];
  const publicKeys = publicKeysOf(options.publicKeys);
  const v1 = listV1Signatures(signature);
  const head = signedHead(id, timestamp);
  // The signed bytes for v1a, made before any await: the body may be a view its owner reuses
  // after this call (firstMatchWeb copies its own before it awaits).
  const content = publicKeys.length > 0 ? joinBytes(head, body) : undefined;
  const keys = secrets.map((s) => (typeof s === 'string' ? parseSigningSecret(s) : s).key);
  // Every pair is compared, as on Node.
  const matching = firstMatchWeb(keys, head, body, v1);
  const found = typeof matching === 'number' ? matching : await matching;
  if (found >= 0) return matched(checked, 'v1', found);
  let listedV1a = 0;
  if (content !== undefined) {
    const signatures = listV1aSignatures(signature, MAX_LISTED);
    listedV1a = signatures.length;
    const index = await matchV1aAsync(publicKeys, signatures, content);
    if (index >= 0) return matched(checked, 'v1a', index);
  }
  return noMatch(options, v1.length, listedV1a);
}
