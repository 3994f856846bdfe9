import type { AttemptOutcome } from './attempt-outcome.js';

/** How often one URL's refusal of one kind is explained in the log: once a minute at most. */
export const REFUSAL_HINT_INTERVAL_MS = 60_000;

/** What was sent with the refused attempt: its `webhook-signature` and the endpoint it went to. */
export interface SentSignature {
  /** The `webhook-signature` header sent: `v1,...` entries (HMAC) or `v1a,...` ones (Ed25519). */
  signature?: string | undefined;
  /** The endpoint the delivery was made for; null before endpoints. */
  endpointId?: string | null;
}

/** True when the attempt was signed with Ed25519: its `webhook-signature` lists `v1a,` entries. */
const signedV1a = (sent: SentSignature | undefined) =>
  (sent?.signature ?? '').split(' ').some((entry) => entry.startsWith('v1a,'));

/**
 * What a receiver's 401 or 403 (or 500 `client_address_unknown`) most likely means, in words a developer can act on: a payhook
 * receiver (or one speaking its error codes) names the proof it refused in its body's `error.code`.
 * A refused signature of an endpoint that signs with Ed25519 (v1a, seen in `sent.signature`)
 * points at the endpoint's `whpk_` public key, which the receiver verifies with; any other at the
 * business's signing secret. Undefined for any other answer.
 *
 * @example
 * ```ts
 * refusalHint({ statusCode: 401, responseBody: '{"error":{"code":"invalid_checksum"}}', ... }, 'biz_1');
 * // 'checksum refused: is the receiver using business id biz_1?'
 * ```
 */
export function refusalHint(
  outcome: AttemptOutcome,
  businessId: string,
  sent?: SentSignature,
): string | undefined {
  const status = outcome.statusCode;
  if (status !== 401 && status !== 403 && status !== 500) return undefined;
  const code = receiverErrorCode(outcome.responseBody);
  if (status === 500) {
    return code === 'client_address_unknown'
      ? "the receiver cannot see this sender's address (client_address_unknown): give its handler getClientAddress (the header its proxy writes), or, with no proxy in front (next dev, next start locally), allowAnyIp: true (ALLOWED_IPS=* in the quickstarts) with signingSecrets"
      : undefined;
  }
  switch (code) {
    case 'invalid_checksum':
      return `checksum refused: is the receiver using business id ${businessId}?`;
    case 'invalid_signature':
    case 'signature_required':
      if (signedV1a(sent)) {
        const where = sent?.endpointId
          ? `GET /webhook-endpoints/${sent.endpointId}/signing-secrets`
          : 'GET /webhook-endpoints/{id}/signing-secrets';
        return `signature refused (${code}): this endpoint signs with Ed25519 (v1a), not the business's secret: is the receiver's signingPublicKeys this endpoint's current whpk_ public key (${where}; after a rotation, the new one)?`;
      }
      return `signature refused (${code}): is the receiver using this business's current signing secret (GET /accounts/signing-secrets)?`;
    case 'signature_timestamp_out_of_tolerance':
      return "signature timestamp refused: is the receiver's clock (or this sender's) set right?";
    case 'ip_not_allowed':
      return "source address refused: is this sender's address in the receiver's allowedIps?";
    default:
      return undefined;
  }
}

/**
 * The error code a receiver names in its JSON body (`{"error":{"code":"invalid_checksum"}}`, as
 * payhook's receivers answer), or undefined for any other body.
 */
export function receiverErrorCode(responseBody: string | null): string | undefined {
  if (!responseBody) return undefined;
  try {
    const code = (JSON.parse(responseBody) as { error?: { code?: unknown } } | null)?.error?.code;
    return typeof code === 'string' && /^[a-z][a-z0-9_]{0,63}$/.test(code) ? code : undefined;
  } catch {
    return undefined;
  }
}

/** Says each kind of refusal of each URL at most once per {@link REFUSAL_HINT_INTERVAL_MS}. */
export function createRefusalHints(now: () => number = Date.now) {
  const said = new Map<string, number>();
  return (url: string, hint: string): boolean => {
    const key = `${url} ${hint}`;
    const last = said.get(key);
    if (last !== undefined && now() - last < REFUSAL_HINT_INTERVAL_MS) return false;
    if (said.size > 10_000) said.clear();
    said.set(key, now());
    return true;
  };
}
