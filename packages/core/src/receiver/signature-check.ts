import { parseSigningPublicKey, type SigningPublicKey } from '../ed25519.js';
import { PayhookError } from '../errors.js';
import { resolveCryptoPath } from '../platform.js';
import {
  DEFAULT_SIGNATURE_TOLERANCE_SECONDS,
  parseSigningSecret,
  readSignatureHeaders,
  type SignatureResult,
  type SigningKey,
  verifyWebhookSignature,
} from '../webhook-signature.js';
import { verifyWebhookSignatureAsync } from '../webhook-signature-async.js';
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

/**
 * Builds the signature step from the receiver's options, validating them (a TypeError names the
 * bad option, never a secret). With neither `signingSecrets` nor `signingPublicKeys` it passes
 * everything: the checksum and the allow-list alone authenticate, as before signatures existed.
 */
export function createSignatureCheck(options: ReceiverOptions): SignatureCheck {
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
  const path = resolveCryptoPath(options.crypto);
  const required = options.requireSignature ?? false;
  if (typeof required !== 'boolean') throw new TypeError('Invalid requireSignature: expected a boolean.');
  if (required && keys.length === 0 && publicKeys.length === 0) {
    throw new TypeError('requireSignature: true needs signingSecrets or signingPublicKeys to verify with.');
  }
  const tolerance = options.signatureToleranceSeconds ?? DEFAULT_SIGNATURE_TOLERANCE_SECONDS;
  if (typeof tolerance !== 'number' || !Number.isFinite(tolerance) || tolerance <= 0) {
    throw new TypeError(
      `Invalid signatureToleranceSeconds: ${String(tolerance)} (expected a positive number).`,
    );
  }
  if (keys.length === 0 && publicKeys.length === 0) return () => undefined;
  const verifyOptions = {
    secrets: keys,
    publicKeys,
    toleranceSeconds: tolerance,
    crypto: path,
  };

  return (request, body) => {
    const received = readSignatureHeaders(request.headers ?? {});
    if (received.id === undefined && received.timestamp === undefined && received.signature === undefined) {
      return required
        ? new PayhookError(
            'signature_required',
            'This receiver requires a signature: send webhook-id, webhook-timestamp and webhook-signature.',
          )
        : undefined;
    }
    // A parsed body is signed as JSON.stringify gives it back: the sender's compact bytes, in
    // its key order. Mount the receiver before any body parser to verify the bytes as sent.
    const bytes = ('rawBody' in body ? body.rawBody : JSON.stringify(body.parsedBody)) ?? '';
    if (path === 'node') return verdict(verifyWebhookSignature(received, bytes, verifyOptions));
    return verifyWebhookSignatureAsync(received, bytes, verifyOptions).then(verdict);
  };
}
