import { DEFAULT_MAX_DEPTH } from './canonical-rules.js';
import { PayhookError } from './errors.js';
import { decodeUtf8, parseJson } from './lexical-canonical-json.js';
import { Scanner } from './lexical-scanner.js';
import { CLOSE_BRACE, END, isWs, OPEN_BRACE, QUOTE, stringEnd, unitsOf } from './lexical-tokens.js';

/*
 * The envelope of an event, `{"event":...,"data":...,"checksum":"..."}` (DESIGN.md, "The wire
 * format of an event"): written by `encodeEnvelope`, read by `parseEnvelope`. The receiver's fast
 * path matches the members as text exactly as the encoder writes them, so both use these pieces.
 */
const EVENT_MEMBER = '{"event":';
const DATA_MEMBER = ',"data":';
const CHECKSUM_MEMBER = ',"checksum":';

/** A webhook body as the service sends it. */
export interface SignedPayload<Event extends string = string, Data = unknown> {
  event: Event;
  data: Data;
  checksum: string;
}

/** What `verifyChecksum` reads: the raw body (preferred) or an already parsed body. */
export interface VerifyInput {
  rawBody?: string | Uint8Array | undefined;
  payload?: unknown;
}

/**
 * The text of a signed event in the sender's layout, with `data` given as JSON text and spliced in
 * as it is: `{"event":"...","data":<dataText>,"checksum":"..."}`, no whitespace between members.
 * A payhook receiver reads a body in this layout on its fast path ({@link parseEnvelope}, its
 * inverse). To sign and encode in one step, use `encodeSignedEvent`; this is for data already
 * encoded, by another serializer for instance.
 *
 * @example
 * ```ts
 * const dataText = '{"amount":1.0,"id":"pay_1"}'; // as another sender wrote and signed it
 * const body = encodeEnvelope('payment.session.created', dataText, checksum);
 * // '{"event":"payment.session.created","data":{"amount":1.0,"id":"pay_1"},"checksum":"…"}'
 * ```
 */
export function encodeEnvelope(event: string, dataText: string, checksum: string): string {
  return `${EVENT_MEMBER}${JSON.stringify(event)}${DATA_MEMBER}${dataText}${CHECKSUM_MEMBER}${JSON.stringify(checksum)}}`;
}

/** The value of a hex digit's code unit, either case; -1 for anything else. */
function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const lower = c | 0x20;
  return lower >= 0x61 && lower <= 0x66 ? lower - 0x57 : -1;
}

/**
 * The 32 bytes a checksum of 64 hex digits (either case) stands for, or undefined if it is not
 * one: the check and the decoding in one pass (a regular expression and then `Buffer.from(hex)`
 * each showed in profiles). A Buffer from Node's pool, not a `new Uint8Array(32)`: V8 keeps so
 * small an array on its heap, and moves it off the heap, at a cost, when native code such as
 * `timingSafeEqual` reads it.
 */
export function checksumBytes(checksum: string): Buffer | undefined {
  if (checksum.length !== 64) return undefined;
  const bytes = Buffer.allocUnsafe(32);
  for (let k = 0; k < 32; k++) {
    const high = hexValue(checksum.charCodeAt(2 * k));
    const low = hexValue(checksum.charCodeAt(2 * k + 1));
    if ((high | low) < 0) return undefined;
    bytes[k] = (high << 4) | low;
  }
  return bytes;
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
  const expected = typeof checksum === 'string' ? checksumBytes(checksum) : undefined;
  if (expected === undefined) {
    throw new PayhookError('malformed_payload', 'The body has no "checksum" of 64 hex digits.', {
      details: [{ field: 'checksum', message: 'must be 64 hexadecimal characters' }],
    });
  }
  // Whatever the mode, a raw body is read for duplicate keys and depth before any HMAC: a body
  // that two parsers would read differently is refused, not verified (DESIGN.md).
  const lexicalData = text === undefined ? undefined : lexicalEnvelope(text, maxDepth).data;
  return { payload: payload as SignedPayload, text, expected, lexicalData };
}

/** What a lexical read of a webhook body finds at its top level. */
export interface LexicalEnvelope {
  /** Canonical text of `data` without a top-level `checksum` key, or undefined if absent. */
  data: string | undefined;
  /** Whether the body was in the sender's layout, read on the fast path. */
  senderLayout: boolean;
}

/**
 * Reads a webhook body `{"event", "data", "checksum"}` that `JSON.parse` has already accepted,
 * and returns the lexical canonical text of its `data` member (a top-level `checksum` key inside
 * `data` left out). Checks duplicate keys and depth over the whole body.
 *
 * `data` that is canonical already (what an RFC 8785 sender writes) costs one scan that allocates
 * nothing and is taken verbatim. A body in the sender's own layout (what {@link encodeEnvelope}
 * writes) has its three members matched as text; any other is read as an arbitrary object.
 */
export function lexicalEnvelope(text: string, maxDepth: number = DEFAULT_MAX_DEPTH): LexicalEnvelope {
  const scanner = new Scanner(text, unitsOf(text), maxDepth);
  const laidOut = senderLayoutData(scanner);
  if (laidOut !== undefined) return { data: laidOut, senderLayout: true };
  scanner.i = 0;
  if (scanner.u[scanner.skipWs()] !== OPEN_BRACE) return { data: undefined, senderLayout: false };
  return { data: scanner.envelopeData(), senderLayout: false };
}

/**
 * The lexical text of `data` for a body in the sender's own layout (see {@link encodeEnvelope});
 * undefined for any other layout, which {@link lexicalEnvelope} then reads as an arbitrary object.
 * Same result, same checks (duplicate keys and depth inside `data`; `event` and `checksum` are
 * strings, which hold neither), without the bookkeeping of arbitrary members: the three keys are
 * matched as text and are distinct.
 */
function senderLayoutData(scanner: Scanner): string | undefined {
  const { s: text, u: units } = scanner;
  if (!text.startsWith(EVENT_MEMBER) || units[EVENT_MEMBER.length] !== QUOTE) return undefined;
  let i = stringEnd(units, EVENT_MEMBER.length) & END;
  if (!text.startsWith(DATA_MEMBER, i)) return undefined;
  scanner.i = i + DATA_MEMBER.length;
  if (isWs(units[scanner.i] as number)) return undefined;
  const data = scanner.canonicalText(1, true);
  i = scanner.i;
  if (!text.startsWith(CHECKSUM_MEMBER, i) || units[i + CHECKSUM_MEMBER.length] !== QUOTE) return undefined;
  i = stringEnd(units, i + CHECKSUM_MEMBER.length) & END;
  return units[i] === CLOSE_BRACE ? data : undefined;
}
