import { base64Of, utf8Bytes } from './bytes.js';
import { DEFAULT_MAX_DEPTH } from './canonical-rules.js';
import { type AppliedCanonicalization, candidateMessages, hmacHex, type VerifyOptions } from './checksum.js';
import { matchV1a, matchV1aAsync } from './ed25519.js';
import { parseEnvelope, type VerifyInput } from './envelope.js';
import { isPayhookError, PayhookError } from './errors.js';
import {
  explainSignatureWith,
  formatSignatureExplanation,
  type SignatureDigests,
  type SignatureExplanation,
} from './explain-signature.js';
import { hmacWeb } from './hmac-web.js';
import { type CryptoPath, resolveCryptoPath } from './platform.js';
import { signedContent } from './signature-wire.js';
import {
  type ReceivedSignature,
  readSignatureHeaders,
  signatureDigest,
  type VerifySignatureOptions,
} from './webhook-signature.js';

/** One business id tried against one candidate string. */
export interface ChecksumAttempt {
  businessId: string;
  /** The checksum this key gives for the candidate string. */
  checksum: string;
  matches: boolean;
}

/** One encoding of `data` that was tried, and the exact string that was hashed. */
export interface ChecksumCandidate {
  canonicalization: AppliedCanonicalization;
  /** The exact string hashed: `event + "|" + canonical(data)`; undefined if it could not be built. */
  message: string | undefined;
  attempts: ChecksumAttempt[];
  /** Why the string could not be built (a malformed body, for instance). */
  error?: PayhookError;
}

/** Where two candidate strings first differ. */
export interface CandidateDifference {
  between: [AppliedCanonicalization, AppliedCanonicalization];
  /** Offset (UTF-16 code units) of the first differing character. */
  offset: number;
  /** A few characters either side of the offset in each string. */
  context: [string, string];
}

/** What {@link explainChecksumMismatch} found. */
export interface ChecksumExplanation {
  /** True if some encoding and business id verify the payload. */
  ok: boolean;
  event: string | undefined;
  /** The checksum the payload carries (as sent). */
  received: string | undefined;
  candidates: ChecksumCandidate[];
  differences: CandidateDifference[];
  /** Set when the body could not be read at all. */
  error?: PayhookError;
  /** The signature's side, when `signature` was given: which secret, which string was signed. */
  signature?: SignatureExplanation;
}

/** Options of {@link explainChecksumMismatch}: `verifyChecksum`'s, and the signature to explain. */
export interface ExplainOptions extends VerifyOptions {
  /**
   * The request's headers and the receiver's signing secrets (`v1`) and public keys (`v1a`), to
   * explain `webhook-signature` too.
   */
  signature?: {
    headers: Readonly<Record<string, string | readonly string[] | undefined>>;
    secrets: readonly string[];
    publicKeys?: readonly string[];
    toleranceSeconds?: number;
    /** The clock, in ms (default now). */
    now?: number;
  };
}

const CONTEXT = 24;

/**
 * For humans debugging a checksum mismatch: for each encoding tried and each business id, the
 * exact string that was hashed and its checksum, the checksum the payload carries, and where the
 * candidate strings differ. Takes the same arguments as `verifyChecksum`, and never throws on
 * bad input. With `signature` (the request's headers and the signing secrets) it explains the
 * Standard Webhooks signature too: the string signed, the signature each secret gives, the ones
 * listed, and the timestamp's distance from the clock.
 *
 * @example
 * ```ts
 * const explanation = explainChecksumMismatch({ rawBody }, { businessIds: ['biz_123'] });
 * console.log(formatMismatch(explanation));
 * ```
 */
export function explainChecksumMismatch(input: VerifyInput, options: ExplainOptions): ChecksumExplanation {
  return explainWith(input, options, nodeDigests);
}

/** What an explanation computes: the checksum of a string, and the request's signatures. */
interface Digests extends SignatureDigests {
  checksum(message: string, businessId: string): string;
}

const nodeDigests: Digests = {
  checksum: hmacHex,
  signature: (key, id, timestamp, body) => base64Of(signatureDigest(key, id, timestamp, body)),
  v1a: (key, signatures, id, timestamp, body) =>
    matchV1a([key], signatures, signedContent(id, timestamp, body)) >= 0,
};

function explainWith(input: VerifyInput, options: ExplainOptions, digests: Digests): ChecksumExplanation {
  const explanation = explainChecksum(input, options, digests);
  if (!options.signature) return explanation;
  const { headers, ...rest } = options.signature;
  const body = input.rawBody ?? JSON.stringify(input.payload);
  const signature = explainSignatureWith(readSignatureHeaders(headers), body, rest, digests);
  return { ...explanation, ok: explanation.ok && signature.ok, signature };
}

/**
 * {@link explainChecksumMismatch} on every runtime: the HMACs on Web Crypto where node:crypto is
 * missing (or with `crypto: 'web'`). The same explanation.
 *
 * @deprecated A mismatch is explained on Node, from the body and headers as received: use
 * {@link explainChecksumMismatch} (or `payhook verify`). Removed in the next major version.
 */
export async function explainChecksumMismatchAsync(
  input: VerifyInput,
  options: ExplainOptions & { crypto?: CryptoPath | undefined },
): Promise<ChecksumExplanation> {
  if (resolveCryptoPath(options.crypto) === 'node') return explainChecksumMismatch(input, options);
  // Once to learn which HMACs it shows (computed meanwhile on Web Crypto), once to show them.
  const done = new Map<string, string>();
  const pending: Promise<unknown>[] = [];
  const hex = (d: Uint8Array) => Array.from(d, (b) => b.toString(16).padStart(2, '0')).join('');
  const want = (key: string, digest: () => Promise<string>) => {
    if (!done.has(key)) {
      done.set(key, '');
      pending.push(digest().then((value) => done.set(key, value)));
    }
    return done.get(key) as string;
  };
  const web: Digests = {
    checksum: (message, id) =>
      want(`c\u0000${id}\u0000${message}`, async () => hex(await hmacWeb(id, utf8Bytes(message)))),
    signature: (key, id, timestamp, body) =>
      want(`s\u0000${base64Of(key)}\u0000${id}\u0000${timestamp}`, async () =>
        base64Of(await hmacWeb(key, signedContent(id, timestamp, body))),
      ),
    v1a: (key, signatures, id, timestamp, body) =>
      want(`a\u0000${key.publicKey}\u0000${id}\u0000${timestamp}`, async () =>
        String((await matchV1aAsync([key], signatures, signedContent(id, timestamp, body))) >= 0),
      ) === 'true',
  };
  explainWith(input, options, web);
  await Promise.all(pending);
  return explainWith(input, options, web);
}

function explainChecksum(input: VerifyInput, options: VerifyOptions, digests: Digests): ChecksumExplanation {
  const mode = options.canonicalization ?? (input.rawBody !== undefined ? 'auto' : 'jcs');
  let envelope: ReturnType<typeof parseEnvelope>;
  try {
    envelope = parseEnvelope(input, options.maxDepth ?? DEFAULT_MAX_DEPTH);
  } catch (error) {
    return {
      ok: false,
      event: undefined,
      received: undefined,
      candidates: [],
      differences: [],
      error: toPayhookError(error),
    };
  }
  const { payload } = envelope;
  const received = payload.checksum.toLowerCase();
  const candidates: ChecksumCandidate[] = [];
  for (const candidate of candidateMessages(envelope, mode === 'lexical' || mode === 'jcs' ? mode : 'auto')) {
    try {
      const message = candidate.message();
      const attempts = options.businessIds.map((businessId) => {
        const checksum = digests.checksum(message, businessId);
        return { businessId, checksum, matches: checksum === received };
      });
      candidates.push({ canonicalization: candidate.canonicalization, message, attempts });
    } catch (error) {
      candidates.push({
        canonicalization: candidate.canonicalization,
        message: undefined,
        attempts: [],
        error: toPayhookError(error),
      });
    }
  }
  const differences: CandidateDifference[] = [];
  for (let a = 0; a < candidates.length; a++) {
    for (let b = a + 1; b < candidates.length; b++) {
      const x = candidates[a] as ChecksumCandidate;
      const y = candidates[b] as ChecksumCandidate;
      if (x.message === undefined || y.message === undefined) continue;
      const offset = firstDifference(x.message, y.message);
      if (offset === -1) continue;
      differences.push({
        between: [x.canonicalization, y.canonicalization],
        offset,
        context: [around(x.message, offset), around(y.message, offset)],
      });
    }
  }
  return {
    ok: candidates.some((c) => c.attempts.some((t) => t.matches)),
    event: payload.event,
    received: payload.checksum,
    candidates,
    differences,
  };
}

function toPayhookError(error: unknown): PayhookError {
  return isPayhookError(error)
    ? error
    : new PayhookError('malformed_payload', 'The body could not be read.', { cause: error });
}

function firstDifference(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a.charCodeAt(i) !== b.charCodeAt(i)) return i;
  return a.length === b.length ? -1 : n;
}

function around(s: string, offset: number): string {
  const start = Math.max(0, offset - CONTEXT);
  const end = Math.min(s.length, offset + CONTEXT);
  return `${start > 0 ? '…' : ''}${s.slice(start, end)}${end < s.length ? '…' : ''}`;
}

const PREVIEW = 160;

/**
 * The text `payhook verify` prints for an explanation: one block per encoding, the checksum each
 * business id gives, and where the encodings differ.
 *
 * @example
 * ```ts
 * process.stderr.write(formatMismatch(explainChecksumMismatch({ rawBody }, { businessIds })));
 * ```
 */
export function formatMismatch(explanation: ChecksumExplanation): string {
  const lines: string[] = [];
  if (explanation.error) {
    lines.push(`The payload could not be read: ${explanation.error.message} [${explanation.error.code}]`);
    return `${lines.join('\n')}\n`;
  }
  lines.push(explanation.ok ? 'The checksum verifies.' : 'The checksum does not verify.');
  lines.push(`  event:    ${explanation.event}`);
  lines.push(`  received: ${explanation.received}`);
  for (const candidate of explanation.candidates) {
    lines.push('');
    lines.push(`${candidate.canonicalization} canonicalization:`);
    if (candidate.message === undefined) {
      lines.push(`  could not build the string: ${candidate.error?.message ?? 'unknown error'}`);
      continue;
    }
    const preview =
      candidate.message.length > PREVIEW
        ? `${candidate.message.slice(0, PREVIEW)}… (${candidate.message.length} chars)`
        : candidate.message;
    lines.push(`  hashed:   ${preview}`);
    for (const attempt of candidate.attempts) {
      lines.push(
        `  ${attempt.matches ? 'MATCH' : 'no match'}  key ${JSON.stringify(attempt.businessId)} -> ${attempt.checksum}`,
      );
    }
  }
  if (explanation.differences.length > 0) {
    lines.push('');
    for (const d of explanation.differences) {
      lines.push(`${d.between[0]} and ${d.between[1]} differ at offset ${d.offset}:`);
      lines.push(`  ${d.between[0]}: ${d.context[0]}`);
      lines.push(`  ${d.between[1]}: ${d.context[1]}`);
    }
  }
  if (explanation.signature) lines.push('', ...formatSignatureExplanation(explanation.signature).split('\n'));
  if (!explanation.ok) {
    lines.push('');
    lines.push(
      'Hints: the key is the id of the business that receives the event (not an API key); verify the raw body as received (a body parser that re-serializes changes numbers and escapes); a sender that escapes "/" or non-ASCII only verifies with lexical or auto canonicalization.',
    );
  }
  return `${lines.join('\n')}\n`;
}

/**
 * Explains a Standard Webhooks signature on node:crypto (see {@link SignatureExplanation}); never
 * throws on bad input.
 *
 * @example
 * ```ts
 * const explanation = explainSignature(readSignatureHeaders(req.headers), rawBody, { publicKeys: ['whpk_...'] });
 * console.log(formatSignatureExplanation(explanation));
 * ```
 */
export function explainSignature(
  received: ReceivedSignature,
  body: string | Uint8Array,
  options: VerifySignatureOptions,
): SignatureExplanation {
  return explainSignatureWith(received, body, options, nodeDigests);
}
