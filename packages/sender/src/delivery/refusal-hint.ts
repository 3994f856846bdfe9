import type { AttemptOutcome } from './attempt-outcome.js';

/** How often one URL's refusal of one kind is explained in the log: once a minute at most. */
export const REFUSAL_HINT_INTERVAL_MS = 60_000;

/**
 * What a receiver's 401 or 403 most likely means, in words a developer can act on: a payhook
 * receiver (or one speaking its error codes) names the proof it refused in its body's `error.code`.
 * Undefined for any other answer.
 *
 * @example
 * ```ts
 * refusalHint({ statusCode: 401, responseBody: '{"error":{"code":"invalid_checksum"}}', ... }, 'biz_1');
 * // 'checksum refused: is the receiver using business id biz_1?'
 * ```
 */
export function refusalHint(outcome: AttemptOutcome, businessId: string): string | undefined {
  if ((outcome.statusCode !== 401 && outcome.statusCode !== 403) || !outcome.responseBody) return undefined;
  let code: unknown;
  try {
    code = (JSON.parse(outcome.responseBody) as { error?: { code?: unknown } }).error?.code;
  } catch {
    return undefined;
  }
  switch (code) {
    case 'invalid_checksum':
      return `checksum refused: is the receiver using business id ${businessId}?`;
    case 'invalid_signature':
    case 'signature_required':
      return `signature refused (${code}): is the receiver using this business's current signing secret (GET /accounts/signing-secrets)?`;
    case 'signature_timestamp_out_of_tolerance':
      return "signature timestamp refused: is the receiver's clock (or this sender's) set right?";
    case 'ip_not_allowed':
      return "source address refused: is this sender's address in the receiver's allowedIps?";
    default:
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
