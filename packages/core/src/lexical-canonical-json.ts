import { utf8Slice } from './bytes.js';
import { DEFAULT_MAX_DEPTH } from './canonical-rules.js';
import { PayhookError } from './errors.js';
import { Scanner } from './lexical-scanner.js';

export { DEFAULT_MAX_DEPTH } from './canonical-rules.js';

/** Options of {@link lexicalCanonicalJson}. */
export interface LexicalOptions {
  /** Deepest nesting of objects and arrays accepted (default 64, at most 1,000 whatever is asked). */
  maxDepth?: number;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Decodes a raw body as UTF-8; invalid UTF-8 is a malformed payload, never a replacement character. */
export function decodeUtf8(raw: string | Uint8Array): string {
  if (typeof raw === 'string') return raw;
  try {
    return utf8.decode(raw);
  } catch (cause) {
    throw new PayhookError('malformed_payload', 'The body is not valid UTF-8.', { cause });
  }
}

/** `JSON.parse` whose failure is a `PayhookError` with code `malformed_payload`. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (cause) {
    throw new PayhookError('malformed_payload', `The body is not valid JSON: ${(cause as Error).message}`, {
      cause,
    });
  }
}

/**
 * Canonical form of raw JSON text that keeps every token as its sender wrote it: keys sorted at
 * every depth (by the UTF-16 code units of the decoded key), insignificant whitespace dropped, and
 * every string and number token left exactly as written (`"\/"`, `"\u00e9"` and `1.0` survive).
 * This reproduces the checksum of any sender that sorted keys and signed its own serialization
 * (PHP's `json_encode`, for instance), which RFC 8785 re-encoding would not.
 *
 * Throws a `PayhookError` with code `malformed_payload` for invalid JSON, duplicate keys, or
 * nesting deeper than `maxDepth` (or than 1,000 levels, whatever `maxDepth` says).
 *
 * @example
 * ```ts
 * lexicalCanonicalJson('{ "b": 1.0, "a": "\\/path" }'); // '{"a":"\\/path","b":1.0}'
 * ```
 */
export function lexicalCanonicalJson(raw: string | Uint8Array, options: LexicalOptions = {}): string {
  const text = decodeUtf8(raw);
  parseJson(text);
  const scanner = new Scanner(text, options.maxDepth ?? DEFAULT_MAX_DEPTH);
  scanner.skipWs();
  const bytes = scanner.canonicalBytes(0, false);
  return utf8Slice(bytes, 0, bytes.length);
}
