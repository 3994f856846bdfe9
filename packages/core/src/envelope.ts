import { allocBytesUnsafe, utf8Bytes, utf8Slice } from './bytes.js';
import { DEFAULT_MAX_DEPTH, MAX_NESTING } from './canonical-rules.js';
import { PayhookError } from './errors.js';
import { decodeUtf8, parseJson } from './lexical-canonical-json.js';
import { Scanner } from './lexical-scanner.js';
import { readsBegun } from './lexical-tape.js';
import { bytesAt, CLOSE_BRACE, END, isWs, OPEN_BRACE, QUOTE, stringEnd } from './lexical-tokens.js';

/*
 * The envelope of an event, `{"event":...,"data":...,"checksum":"..."}` (docs/service-interface.md,
 * "The wire format"): written by `encodeEnvelope`, read by `parseEnvelope`. The receiver's fast
 * path matches the members as text exactly as the encoder writes them, so both use these pieces.
 */
const EVENT_MEMBER = '{"event":';
const DATA_MEMBER = ',"data":';
const CHECKSUM_MEMBER = ',"checksum":';
// The same, as the bytes the receiver matches.
const EVENT_BYTES = utf8Bytes(EVENT_MEMBER);
const DATA_BYTES = utf8Bytes(DATA_MEMBER);
const CHECKSUM_BYTES = utf8Bytes(CHECKSUM_MEMBER);

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
export function checksumBytes(checksum: string): Uint8Array | undefined {
  if (checksum.length !== 64) return undefined;
  const bytes = allocBytesUnsafe(32);
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
  expected: Uint8Array;
  /**
   * Lexical canonical bytes of `data` (without its `checksum` key), when there was a raw body: a
   * view into the lexical reader's shared buffers, good until its next read. Read it through
   * {@link lexicalDataOf}, which reads the text again if another read came in between.
   */
  lexicalData: Uint8Array | undefined;
  /** `readsBegun()` when `lexicalData` was read. */
  lexicalRead: number;
}

/**
 * The lexical canonical bytes of an envelope's `data` (a view, good until the next read): as
 * {@link parseEnvelope} read them, or read again from the body's text if another read has begun
 * since (parsing and verifying are one synchronous step today; this keeps them right if not).
 */
export function lexicalDataOf(envelope: ParsedEnvelope): Uint8Array | undefined {
  if (envelope.text === undefined || envelope.lexicalRead === readsBegun()) return envelope.lexicalData;
  // The first read enforced the caller's depth limit; this one only needs to reach as deep.
  envelope.lexicalData = lexicalEnvelopeBytes(envelope.text, MAX_NESTING).data;
  envelope.lexicalRead = readsBegun();
  return envelope.lexicalData;
}

/** {@link lexicalDataOf} as text. */
export function lexicalTextOf(envelope: ParsedEnvelope): string | undefined {
  const data = lexicalDataOf(envelope);
  return data === undefined ? undefined : utf8Slice(data, 0, data.length);
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
  // that two parsers would read differently is refused, not verified.
  const lexicalData = text === undefined ? undefined : lexicalEnvelopeBytes(text, maxDepth).data;
  return { payload: payload as SignedPayload, text, expected, lexicalData, lexicalRead: readsBegun() };
}

/** What a lexical read of a webhook body finds at its top level. */
export interface LexicalEnvelope<Data = string> {
  /** Canonical text of `data` without a top-level `checksum` key, or undefined if absent. */
  data: Data | undefined;
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
  const { data, senderLayout } = lexicalEnvelopeBytes(text, maxDepth);
  return { data: data === undefined ? undefined : utf8Slice(data, 0, data.length), senderLayout };
}

/**
 * {@link lexicalEnvelope} with `data` as its UTF-8 bytes, what the checksum's HMAC hashes: a view
 * into the reader's shared buffers, good until its next read.
 */
export function lexicalEnvelopeBytes(
  text: string,
  maxDepth: number = DEFAULT_MAX_DEPTH,
): LexicalEnvelope<Uint8Array> {
  const scanner = new Scanner(text, maxDepth);
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
function senderLayoutData(scanner: Scanner): Uint8Array | undefined {
  const { u } = scanner;
  if (!bytesAt(u, 0, EVENT_BYTES) || u[EVENT_BYTES.length] !== QUOTE) return undefined;
  let i = stringEnd(u, EVENT_BYTES.length) & END;
  if (!bytesAt(u, i, DATA_BYTES)) return undefined;
  scanner.i = i + DATA_BYTES.length;
  if (isWs(u[scanner.i] as number)) return undefined;
  const data = scanner.canonicalBytes(1, true);
  i = scanner.i;
  if (!bytesAt(u, i, CHECKSUM_BYTES) || u[i + CHECKSUM_BYTES.length] !== QUOTE) return undefined;
  i = stringEnd(u, i + CHECKSUM_BYTES.length) & END;
  return u[i] === CLOSE_BRACE ? data : undefined;
}
