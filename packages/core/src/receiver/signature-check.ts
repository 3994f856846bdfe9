import { digestPath } from '../digest-path.js';
import { parseSigningPublicKey, type SigningPublicKey } from '../ed25519.js';
import { PayhookError } from '../errors.js';
import { parseSigningSecret, type SigningKey } from '../signing-secret.js';
import {
  checkSignature,
  DEFAULT_SIGNATURE_TOLERANCE_SECONDS,
  readSignatureHeaders,
  type SignatureResult,
} from '../webhook-signature.js';
import type { Logger } from './logger.js';
import type { ReceiverOptions, ReceiverRequest } from './types.js';

/**
 * The receiver's signature step: undefined when the request passes (signed with a configured
 * secret or public key, or unsigned while signatures are optional), else the error to answer
 * with. Synchronous on node:crypto; a promise of the same on Web Crypto.
 */
export type SignatureCheck = (
  request: ReceiverRequest,
  body: { rawBody: string | Uint8Array } | { parsedBody: unknown },
) => PayhookError | undefined | Promise<PayhookError | undefined>;

function parseAll<T>(configured: unknown, option: string, expected: string, parse: (text: string) => T): T[] {
  if (configured !== undefined && !Array.isArray(configured)) {
    throw new TypeError(`Invalid ${option}: expected an array of ${expected}.`);
  }
  return ((configured ?? []) as string[]).map((text, i) => {
    try {
      return parse(text);
    } catch (error) {
      throw new TypeError(`Invalid ${option}[${i}]: ${(error as Error).message}`);
    }
  });
}

const verdict = (result: SignatureResult) => (result.ok ? undefined : result.error);

function flag(options: ReceiverOptions, option: 'requireSignature' | 'allowUnsigned'): boolean | undefined {
  const value = options[option];
  if (value !== undefined && typeof value !== 'boolean') {
    throw new TypeError(`Invalid ${option}: expected a boolean.`);
  }
  return value;
}

/**
 * Whether a receiver with signing keys takes a request without signature headers: only when it
 * opts out, with `allowUnsigned: true` or the older `requireSignature: false`. Validates the two
 * options (a TypeError for a non-boolean, for both given and contradicting, or for a signature
 * required without keys to verify it with).
 */
function acceptsUnsigned(options: ReceiverOptions, hasKeys: boolean): boolean {
  const requireSignature = flag(options, 'requireSignature');
  const allowUnsigned = flag(options, 'allowUnsigned');
  if (allowUnsigned === true && requireSignature === true) {
    throw new TypeError('Give allowUnsigned: true or requireSignature: true, not both.');
  }
  if (requireSignature === true && !hasKeys) {
    throw new TypeError('requireSignature: true needs signingSecrets or signingPublicKeys to verify with.');
  }
  return allowUnsigned === true || requireSignature === false;
}

/**
 * Builds the signature step from the receiver's options, validating them (a TypeError names the
 * bad option, never a secret). With neither `signingSecrets` nor `signingPublicKeys` it passes
 * everything: the checksum and the allow-list alone authenticate, as before signatures existed.
 * With either, a request without signature headers is refused (401 `signature_required`) unless
 * the receiver opts out with `allowUnsigned: true`, which `logger` warns about once, here.
 */
export function createSignatureCheck(options: ReceiverOptions, logger: Logger): SignatureCheck {
  const keys: SigningKey[] = parseAll(
    options.signingSecrets,
    'signingSecrets',
    '"whsec_..." secrets',
    parseSigningSecret,
  );
  const publicKeys: SigningPublicKey[] = parseAll(
    options.signingPublicKeys,
    'signingPublicKeys',
    '"whpk_..." public keys',
    parseSigningPublicKey,
  );
  const path = digestPath(options.crypto);
  const hasKeys = keys.length > 0 || publicKeys.length > 0;
  const required = !acceptsUnsigned(options, hasKeys);
  const tolerance = options.signatureToleranceSeconds ?? DEFAULT_SIGNATURE_TOLERANCE_SECONDS;
  if (typeof tolerance !== 'number' || !Number.isFinite(tolerance) || tolerance <= 0) {
    throw new TypeError(
      `Invalid signatureToleranceSeconds: ${String(tolerance)} (expected a positive number).`,
    );
  }
  if (!hasKeys) return () => undefined;
  if (!required) {
    const spelled =
      options.allowUnsigned === true
        ? 'allowUnsigned: true'
        : 'requireSignature: false (deprecated: write allowUnsigned: true)';
    logger.warn(
      { allowUnsigned: true },
      `payhook: ${spelled}: events without a signature are accepted on their checksum alone, whose key (the business id) is not a strong secret; remove it once every sender signs, and unsigned events are refused (401 signature_required)`,
    );
  }
  const verifyOptions = { secrets: keys, publicKeys, toleranceSeconds: tolerance };

  return (request, body) => {
    const received = readSignatureHeaders(request.headers ?? {});
    if (received.id === undefined && received.timestamp === undefined && received.signature === undefined) {
      return required
        ? new PayhookError(
            'signature_required',
            'This receiver has signingSecrets or signingPublicKeys, so it requires a signature: send webhook-id, webhook-timestamp and webhook-signature (allowUnsigned: true on the receiver accepts unsigned events during a migration).',
          )
        : undefined;
    }
    // A parsed body is signed as JSON.stringify gives it back: the sender's compact bytes, in
    // its key order. Mount the receiver before any body parser to verify the bytes as sent.
    const bytes = ('rawBody' in body ? body.rawBody : JSON.stringify(body.parsedBody)) ?? '';
    const result = checkSignature(received, bytes, verifyOptions, path);
    return result instanceof Promise ? result.then(verdict) : verdict(result);
  };
}

/**
 * What the log line of a refused event adds to its message: the receiver option to check, for an
 * event whose signature or checksum did not verify (the answer's code and message stay as they
 * are). A signature names `signingSecrets` (v1, `whsec_...`) and/or `signingPublicKeys` (v1a,
 * Ed25519, `whpk_...`): those the receiver has, narrowed to the schemes the request's
 * `webhook-signature` lists when it lists any of them. A checksum names `businessIds`, its key.
 */
export function refusalLogHint(
  code: string,
  options: Pick<ReceiverOptions, 'signingSecrets' | 'signingPublicKeys'>,
  headers: ReceiverRequest['headers'],
): string {
  if (code === 'invalid_checksum') {
    return ' (check businessIds: the checksum is keyed by the business id the event names)';
  }
  if (code !== 'invalid_signature') return '';
  const configured = {
    v1: Array.isArray(options.signingSecrets) && options.signingSecrets.length > 0,
    v1a: Array.isArray(options.signingPublicKeys) && options.signingPublicKeys.length > 0,
  };
  const listed = new Set(
    (readSignatureHeaders(headers ?? {}).signature ?? '').split(' ').map((entry) => entry.split(',')[0]),
  );
  const both = { v1: configured.v1 && listed.has('v1'), v1a: configured.v1a && listed.has('v1a') };
  const named = both.v1 || both.v1a ? both : configured;
  const names = [
    named.v1 ? "signingSecrets (the sender's whsec_... secret, v1)" : '',
    named.v1a ? "signingPublicKeys (the endpoint's whpk_... public key, v1a)" : '',
  ].filter(Boolean);
  return names.length > 0 ? ` (check ${names.join(' and ')}: after a rotation, add the new one)` : '';
}
