import { utf8Bytes } from './bytes.js';
import { canonicalSignedData } from './canonical-json.js';
import { DEFAULT_MAX_DEPTH } from './canonical-rules.js';
import { type DigestPath, digestPath, nodePath } from './digest-path.js';
import {
  lexicalDataOf,
  lexicalTextOf,
  type ParsedEnvelope,
  parseEnvelope,
  type SignedPayload,
  type VerifyInput,
} from './envelope.js';
import { isPayhookError, PayhookError } from './errors.js';
import { hmac } from './hmac.js';
import { hmacWeb } from './hmac-web.js';
import { type CryptoPath, nodeCrypto, requireNodeCrypto, resolveCryptoPath } from './platform.js';

// The envelope's reading has its own module; these names stay importable from here.
export { type ParsedEnvelope, parseEnvelope, type SignedPayload, type VerifyInput } from './envelope.js';

/**
 * How the receiver rebuilds the signed string from a body:
 * - `jcs`: RFC 8785 over the parsed `data` (the only choice when just a parsed body is at hand);
 * - `lexical`: from the raw body, keys sorted and whitespace dropped, tokens kept as written;
 * - `auto`: lexical, then jcs if lexical's checksum does not match.
 */
export type Canonicalization = 'auto' | 'jcs' | 'lexical';

/** The encoding that actually verified a payload. */
export type AppliedCanonicalization = Exclude<Canonicalization, 'auto'>;

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

/**
 * What `verifyChecksum` returns: `ok: true` with the verified event, or `ok: false` with the
 * error to answer (never thrown).
 *
 * @example
 * ```ts
 * const result: VerifyResult = verifyChecksum({ rawBody }, { businessIds: [process.env.BUSINESS_ID!] });
 * if (!result.ok) return res.status(result.error.status).json({ error: result.error.code });
 * console.log(result.event, result.businessId);
 * ```
 */
export type VerifyResult = VerifySuccess | VerifyFailure;

/** The string the checksum is computed over: `event + "|" + canonical(data)`. */
export function checksumMessage(event: string, canonicalData: string): string {
  return `${event}|${canonicalData}`;
}

/** Lowercase hex HMAC-SHA256 of `message`, keyed by the UTF-8 bytes of the business id. */
export function hmacHex(message: string, businessId: string): string {
  return hmac(businessId, message, undefined, 'hex');
}

/**
 * The checksum the service puts in every event: lowercase hex HMAC-SHA256 of
 * `event + "|" + canonicalJson(data)` (RFC 8785, any top-level `checksum` key of `data` left out),
 * keyed by the UTF-8 bytes of the receiving business's id.
 *
 * @example
 * ```ts
 * const checksum = computeChecksum('payment.session.succeeded', payment, 'a3f1c2d4-...');
 * // To send it, encodeSignedEvent() writes the whole body in the sender's layout.
 * ```
 */
export function computeChecksum(event: string, data: unknown, businessId: string): string {
  if (nodeCrypto === undefined) requireNodeCrypto('computeChecksum');
  return hmacHex(checksumMessage(event, canonicalSignedData(data)), businessId);
}

/** The candidate signed strings for a body, in the order they are tried. */
export function candidateMessages(
  envelope: ParsedEnvelope,
  mode: Canonicalization,
): { canonicalization: AppliedCanonicalization; message: () => string }[] {
  const { payload } = envelope;
  const lexical = () => checksumMessage(payload.event, lexicalTextOf(envelope) as string);
  const jcs = () => checksumMessage(payload.event, canonicalSignedData(payload.data));
  if (mode === 'jcs') return [{ canonicalization: 'jcs', message: jcs }];
  if (envelope.lexicalData === undefined) {
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
  if (nodeCrypto === undefined) requireNodeCrypto('verifyChecksum');
  const read = readEnvelope(input, options, 'verifyChecksum');
  return 'envelope' in read ? verifyEnvelope(read.envelope, read.mode, options.businessIds) : read;
}

/**
 * The options checked (a TypeError for a bad mode or no business id, naming `caller`) and the body
 * read, or the failure to answer for a body that is not an event.
 */
function readEnvelope(
  input: VerifyInput,
  options: VerifyOptions,
  caller: string,
): { envelope: ParsedEnvelope; mode: Canonicalization } | VerifyFailure {
  const mode = resolveMode(input, options);
  if (options.businessIds.length === 0) throw new TypeError(`${caller} needs at least one business id.`);
  try {
    return { envelope: parseEnvelope(input, options.maxDepth ?? DEFAULT_MAX_DEPTH), mode };
  } catch (error) {
    return { ok: false, error: asMalformed(error) };
  }
}

function asMalformed(error: unknown): PayhookError {
  return isPayhookError(error)
    ? error
    : new PayhookError('malformed_payload', 'The body could not be read.', { cause: error });
}

type Verdict = VerifyResult | Promise<VerifyResult>;
const LEXICAL: AppliedCanonicalization[] = ['lexical'];
const JCS: AppliedCanonicalization[] = ['jcs'];
const BOTH: AppliedCanonicalization[] = ['lexical', 'jcs'];

/**
 * The one checksum check, on a body {@link parseEnvelope} read, on either crypto path
 * (digest-path.ts): each candidate signed string in turn (lexical, then RFC 8785 for `auto`), each
 * business id as the key. Never throws on bad input. On node:crypto every step is at once, with
 * no closure made; on the Web path at once or as a promise.
 */
export function checkEnvelope(
  envelope: ParsedEnvelope,
  mode: Canonicalization,
  businessIds: readonly string[],
  path: DigestPath,
): Verdict {
  if (mode === 'jcs') return byJcs(envelope, businessIds, path, JCS);
  const lexicalData = lexicalDataOf(envelope);
  if (lexicalData === undefined) {
    throw new TypeError(`canonicalization "${mode}" needs the raw body; pass rawBody, or use "jcs".`);
  }
  const found = path.matchDigest(businessIds, `${envelope.payload.event}|`, lexicalData, envelope.expected);
  return typeof found === 'number'
    ? afterLexical(envelope, mode, businessIds, path, found)
    : found.then((index) => afterLexical(envelope, mode, businessIds, path, index));
}

function afterLexical(
  envelope: ParsedEnvelope,
  mode: Canonicalization,
  businessIds: readonly string[],
  path: DigestPath,
  index: number,
): Verdict {
  if (index >= 0) return verified(envelope.payload, businessIds[index] as string, 'lexical');
  return mode === 'lexical'
    ? mismatch(businessIds.length, LEXICAL)
    : byJcs(envelope, businessIds, path, BOTH);
}

function byJcs(
  envelope: ParsedEnvelope,
  businessIds: readonly string[],
  path: DigestPath,
  tried: readonly AppliedCanonicalization[],
): Verdict {
  let jcs: string;
  try {
    jcs = canonicalSignedData(envelope.payload.data);
  } catch (error) {
    return { ok: false, error: asMalformed(error) };
  }
  const found = path.matchDigest(businessIds, `${envelope.payload.event}|`, jcs, envelope.expected);
  return typeof found === 'number'
    ? afterJcs(envelope, businessIds, tried, found)
    : found.then((index) => afterJcs(envelope, businessIds, tried, index));
}

function afterJcs(
  envelope: ParsedEnvelope,
  businessIds: readonly string[],
  tried: readonly AppliedCanonicalization[],
  index: number,
): VerifyResult {
  return index >= 0
    ? verified(envelope.payload, businessIds[index] as string, 'jcs')
    : mismatch(businessIds.length, tried);
}

/**
 * The checksum check of {@link verifyChecksum} on a body {@link parseEnvelope} read, on
 * node:crypto. Never throws on bad input.
 */
export function verifyEnvelope(
  envelope: ParsedEnvelope,
  mode: Canonicalization,
  businessIds: readonly string[],
): VerifyResult {
  return checkEnvelope(envelope, mode, businessIds, nodePath) as VerifyResult;
}

function verified(
  payload: SignedPayload,
  businessId: string,
  canonicalization: AppliedCanonicalization,
): VerifySuccess {
  return { ok: true, event: payload.event, data: payload.data, payload, businessId, canonicalization };
}

function mismatch(ids: number, tried: readonly AppliedCanonicalization[]): VerifyFailure {
  return {
    ok: false,
    error: new PayhookError(
      'invalid_checksum',
      `The checksum matches none of the ${ids} configured business id(s) under ${tried.join(
        ' or ',
      )} canonicalization. Check the business id, and that the raw body reaches the verifier unchanged; explainChecksumMismatch() (or \`payhook verify\`) shows the strings that were hashed.`,
    ),
  };
}

/** Options of {@link verifyChecksumAsync}. */
export interface VerifyAsyncOptions extends VerifyOptions {
  /**
   * `auto` (default): node:crypto where the runtime has it, else the Web path (a JavaScript HMAC
   * for bodies up to 12 KB, Web Crypto above). `web` forces the Web path (to try it on Node),
   * `node` requires node:crypto.
   */
  crypto?: CryptoPath | undefined;
}

/**
 * {@link verifyChecksum} on every runtime: on the Web path where node:crypto is missing (browsers,
 * Workers without nodejs_compat, any bundle for the browser platform), the HMAC computed in
 * JavaScript for a body up to 12 KB and by `crypto.subtle` above, compared in constant time either
 * way; on Node with node:crypto. The same flow, the same verdicts, the same errors.
 *
 * @example
 * ```ts
 * const result = await verifyChecksumAsync({ rawBody: await request.text() }, { businessIds: [env.BUSINESS_ID] });
 * if (!result.ok) return Response.json(result.error, { status: result.error.status });
 * ```
 */
export async function verifyChecksumAsync(
  input: VerifyInput,
  options: VerifyAsyncOptions,
): Promise<VerifyResult> {
  const path = digestPath(options.crypto);
  const read = readEnvelope(input, options, path === nodePath ? 'verifyChecksum' : 'verifyChecksumAsync');
  return 'envelope' in read ? checkEnvelope(read.envelope, read.mode, options.businessIds, path) : read;
}

/**
 * {@link computeChecksum} on every runtime: the Web path where node:crypto is missing (or with
 * `crypto: 'web'`), the synchronous one on Node.
 *
 * @deprecated Checksums are computed where events are sent, on Node: use {@link computeChecksum}
 * (or `encodeSignedEvent`, which writes the whole body). Removed in the next major version.
 *
 * @example
 * ```ts
 * const checksum = await computeChecksumAsync('payment.session.succeeded', payment, 'a3f1c2d4-...');
 * ```
 */
export async function computeChecksumAsync(
  event: string,
  data: unknown,
  businessId: string,
  options: { crypto?: CryptoPath | undefined } = {},
): Promise<string> {
  if (resolveCryptoPath(options.crypto) === 'node') return computeChecksum(event, data, businessId);
  const digest = await hmacWeb(businessId, utf8Bytes(checksumMessage(event, canonicalSignedData(data))));
  let hex = '';
  for (let k = 0; k < digest.length; k++) hex += (digest[k] as number).toString(16).padStart(2, '0');
  return hex;
}
