import { createHmac, createSecretKey, type KeyObject, timingSafeEqual } from 'node:crypto';
import { canonicalJsonWithout } from './canonical-json.js';
import { isPayhookError, PayhookError } from './errors.js';
import { DEFAULT_MAX_DEPTH, decodeUtf8, lexicalEnvelope, parseJson } from './lexical-canonical-json.js';

/**
 * How the receiver rebuilds the signed string from a body:
 * - `jcs`: RFC 8785 over the parsed `data` (the only choice when just a parsed body is at hand);
 * - `lexical`: from the raw body, keys sorted and whitespace dropped, tokens kept as written;
 * - `auto`: lexical, then jcs if lexical's checksum does not match.
 */
export type Canonicalization = 'auto' | 'jcs' | 'lexical';

/** The encoding that actually verified a payload. */
export type AppliedCanonicalization = Exclude<Canonicalization, 'auto'>;

/** A webhook body as the service sends it. */
export interface SignedPayload<Event extends string = string, Data = unknown> {
  event: Event;
  data: Data;
  checksum: string;
}

/** What {@link verifyChecksum} reads: the raw body (preferred) or an already parsed body. */
export interface VerifyInput {
  rawBody?: string | Uint8Array | undefined;
  payload?: unknown;
}

/** Options of {@link verifyChecksum}. */
export interface VerifyOptions {
  /** The ids of the businesses this receiver receives for; each is tried as the HMAC key. */
  businessIds: readonly string[];
  /** Default: `auto` with a raw body, `jcs` with a parsed payload. */
  canonicalization?: Canonicalization | undefined;
  /** Deepest nesting accepted in a raw body (default 64). */
  maxDepth?: number | undefined;
}

/** A payload whose checksum one of the business ids verified. */
export interface VerifySuccess {
  ok: true;
  event: string;
  data: unknown;
  /** The exact object that was verified (the parsed body). */
  payload: SignedPayload;
  /** The business id whose key verified the checksum. */
  businessId: string;
  canonicalization: AppliedCanonicalization;
}

/** A payload that did not verify: `error.code` is `malformed_payload` or `invalid_checksum`. */
export interface VerifyFailure {
  ok: false;
  error: PayhookError;
}

export type VerifyResult = VerifySuccess | VerifyFailure;

const HEX_64 = /^[0-9a-fA-F]{64}$/;

/** The string the checksum is computed over: `event + "|" + canonical(data)`. */
export function checksumMessage(event: string, canonicalData: string): string {
  return `${event}|${canonicalData}`;
}

// Key objects are prepared once per business id: it spares OpenSSL a key import on every event.
const keys = new Map<string, KeyObject>();
function keyOf(businessId: string): KeyObject {
  let key = keys.get(businessId);
  if (key === undefined) {
    if (keys.size >= 256) keys.clear();
    key = createSecretKey(Buffer.from(businessId, 'utf8'));
    keys.set(businessId, key);
  }
  return key;
}

/** HMAC-SHA256 of `message`, keyed by the UTF-8 bytes of the business id. */
export function hmac(message: string, businessId: string): Buffer {
  return createHmac('sha256', keyOf(businessId)).update(message, 'utf8').digest();
}

/** Lowercase hex HMAC-SHA256 of `message`, keyed by the UTF-8 bytes of the business id. */
export function hmacHex(message: string, businessId: string): string {
  return hmac(message, businessId).toString('hex');
}

/**
 * The checksum the service puts in every event: lowercase hex HMAC-SHA256 of
 * `event + "|" + canonicalJson(data)` (RFC 8785, any top-level `checksum` key of `data` left out),
 * keyed by the UTF-8 bytes of the receiving business's id.
 *
 * @example
 * ```ts
 * const checksum = computeChecksum('payment.session.succeeded', payment, 'a3f1c2d4-...');
 * await fetch(url, { method: 'POST', body: JSON.stringify({ event: 'payment.session.succeeded', data: payment, checksum }) });
 * ```
 */
export function computeChecksum(event: string, data: unknown, businessId: string): string {
  return hmacHex(checksumMessage(event, canonicalJsonWithout(data, 'checksum')), businessId);
}

/** A body parsed and checked for the three members of the wire format, before any HMAC. */
export interface ParsedEnvelope {
  payload: SignedPayload;
  /** The decoded raw body, when there was one. */
  text: string | undefined;
  /** The 32 checksum bytes the payload carries. */
  expected: Buffer;
  /** Lexical canonical text of `data` (without its `checksum` key), when there was a raw body. */
  lexicalData: string | undefined;
}

/**
 * Parses a raw body (or takes a parsed one) and checks the wire format's shape. Throws a
 * `PayhookError` (`malformed_payload`) that says what is wrong.
 */
export function parseEnvelope(input: VerifyInput, maxDepth: number = DEFAULT_MAX_DEPTH): ParsedEnvelope {
  let text: string | undefined;
  let payload: unknown;
  if (input.rawBody !== undefined) {
    text = decodeUtf8(input.rawBody);
    payload = parseJson(text);
  } else if (input.payload !== undefined) {
    payload = input.payload;
  } else {
    throw new PayhookError('malformed_payload', 'The request has no body.');
  }
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) {
    throw new PayhookError(
      'malformed_payload',
      'The body must be a JSON object with "event", "data" and "checksum".',
    );
  }
  const { event, data, checksum } = payload as Record<string, unknown>;
  if (typeof event !== 'string' || event.length === 0) {
    throw new PayhookError('malformed_payload', 'The body has no "event" string.', {
      details: [{ field: 'event', message: 'must be a non-empty string' }],
    });
  }
  if (data === undefined) {
    throw new PayhookError('malformed_payload', 'The body has no "data" member.', {
      details: [{ field: 'data', message: 'is required' }],
    });
  }
  if (typeof checksum !== 'string' || !HEX_64.test(checksum)) {
    throw new PayhookError('malformed_payload', 'The body has no "checksum" of 64 hex digits.', {
      details: [{ field: 'checksum', message: 'must be 64 hexadecimal characters' }],
    });
  }
  // Whatever the mode, a raw body is read for duplicate keys and depth before any HMAC: a body
  // that two parsers would read differently is refused, not verified (DESIGN.md).
  const lexicalData = text === undefined ? undefined : lexicalEnvelope(text, maxDepth).data;
  return { payload: payload as SignedPayload, text, expected: Buffer.from(checksum, 'hex'), lexicalData };
}

/** The candidate signed strings for a body, in the order they are tried. */
export function candidateMessages(
  envelope: ParsedEnvelope,
  mode: Canonicalization,
): { canonicalization: AppliedCanonicalization; message: () => string }[] {
  const { payload, lexicalData } = envelope;
  const lexical = () => checksumMessage(payload.event, lexicalData as string);
  const jcs = () => checksumMessage(payload.event, canonicalJsonWithout(payload.data, 'checksum'));
  if (mode === 'jcs') return [{ canonicalization: 'jcs', message: jcs }];
  if (lexicalData === undefined) {
    throw new TypeError(`canonicalization "${mode}" needs the raw body; pass rawBody, or use "jcs".`);
  }
  if (mode === 'lexical') return [{ canonicalization: 'lexical', message: lexical }];
  return [
    { canonicalization: 'lexical', message: lexical },
    { canonicalization: 'jcs', message: jcs },
  ];
}

function resolveMode(input: VerifyInput, options: VerifyOptions): Canonicalization {
  const mode = options.canonicalization ?? (input.rawBody !== undefined ? 'auto' : 'jcs');
  if (mode !== 'auto' && mode !== 'jcs' && mode !== 'lexical') {
    throw new TypeError(`Invalid canonicalization: ${String(mode)} (expected "auto", "jcs" or "lexical").`);
  }
  if (mode !== 'jcs' && input.rawBody === undefined) {
    throw new TypeError(`canonicalization "${mode}" needs the raw body; pass rawBody, or use "jcs".`);
  }
  return mode;
}

/**
 * Verifies a webhook body's checksum against one or more business ids. Never throws on bad input:
 * returns `{ ok: true, event, data, payload, businessId, canonicalization }`, or `{ ok: false, error }`
 * where `error.code` is `malformed_payload` (not JSON, duplicate keys, too deep, members missing)
 * or `invalid_checksum`. Checksums are compared as bytes in constant time; upper-case hex is accepted.
 *
 * With a raw body the default is `auto`: lexical first, then RFC 8785. Only a checksum mismatch
 * falls through to RFC 8785; a body that lexical finds malformed is refused.
 *
 * @example
 * ```ts
 * const result = verifyChecksum({ rawBody: req.body }, { businessIds: [process.env.BUSINESS_ID!] });
 * if (!result.ok) return res.status(result.error.status).json(result.error);
 * console.log(result.event, result.businessId, result.canonicalization);
 * ```
 */
export function verifyChecksum(input: VerifyInput, options: VerifyOptions): VerifyResult {
  const mode = resolveMode(input, options);
  if (options.businessIds.length === 0) throw new TypeError('verifyChecksum needs at least one business id.');
  try {
    const envelope = parseEnvelope(input, options.maxDepth ?? DEFAULT_MAX_DEPTH);
    const candidates = candidateMessages(envelope, mode);
    for (const candidate of candidates) {
      const message = candidate.message();
      for (const businessId of options.businessIds) {
        const digest = hmac(message, businessId);
        if (timingSafeEqual(digest, envelope.expected)) {
          const { payload } = envelope;
          return {
            ok: true,
            event: payload.event,
            data: payload.data,
            payload,
            businessId,
            canonicalization: candidate.canonicalization,
          };
        }
      }
    }
    return {
      ok: false,
      error: new PayhookError(
        'invalid_checksum',
        `The checksum matches none of the ${options.businessIds.length} configured business id(s) under ${candidates
          .map((c) => c.canonicalization)
          .join(
            ' or ',
          )} canonicalization. Check the business id, and that the raw body reaches the verifier unchanged; explainChecksumMismatch() (or \`payhook verify\`) shows the strings that were hashed.`,
      ),
    };
  } catch (error) {
    if (isPayhookError(error)) return { ok: false, error };
    return {
      ok: false,
      error: new PayhookError('malformed_payload', 'The body could not be read.', { cause: error }),
    };
  }
}
