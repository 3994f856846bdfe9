import { PayhookError } from '../errors.js';
import {
  DEFAULT_SIGNATURE_TOLERANCE_SECONDS,
  parseSigningSecret,
  readSignatureHeaders,
  type SigningKey,
  verifyWebhookSignature,
} from '../webhook-signature.js';
import type { ReceiverOptions, ReceiverRequest } from './types.js';

/**
 * The receiver's signature step: undefined when the request passes (signed with a configured
 * secret, or unsigned while signatures are optional), else the error to answer with.
 */
export type SignatureCheck = (
  request: ReceiverRequest,
  body: { rawBody: string | Uint8Array } | { parsedBody: unknown },
) => PayhookError | undefined;

/**
 * Builds the signature step from the receiver's options, validating them (a TypeError names the
 * bad option, never a secret). With no `signingSecrets` it passes everything: the checksum and the
 * allow-list alone authenticate, as before signatures existed.
 */
export function createSignatureCheck(options: ReceiverOptions): SignatureCheck {
  const configured = options.signingSecrets;
  if (configured !== undefined && !Array.isArray(configured)) {
    throw new TypeError('Invalid signingSecrets: expected an array of "whsec_..." secrets.');
  }
  const keys: SigningKey[] = (configured ?? []).map((secret, i) => {
    try {
      return parseSigningSecret(secret);
    } catch (error) {
      throw new TypeError(`Invalid signingSecrets[${i}]: ${(error as Error).message}`);
    }
  });
  const required = options.requireSignature ?? false;
  if (typeof required !== 'boolean') throw new TypeError('Invalid requireSignature: expected a boolean.');
  if (required && keys.length === 0) {
    throw new TypeError('requireSignature: true needs signingSecrets to verify with.');
  }
  const tolerance = options.signatureToleranceSeconds ?? DEFAULT_SIGNATURE_TOLERANCE_SECONDS;
  if (typeof tolerance !== 'number' || !Number.isFinite(tolerance) || tolerance <= 0) {
    throw new TypeError(
      `Invalid signatureToleranceSeconds: ${String(tolerance)} (expected a positive number).`,
    );
  }
  if (keys.length === 0) return () => undefined;

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
    const bytes = 'rawBody' in body ? body.rawBody : JSON.stringify(body.parsedBody);
    const result = verifyWebhookSignature(received, bytes ?? '', {
      secrets: keys,
      toleranceSeconds: tolerance,
    });
    return result.ok ? undefined : result.error;
  };
}
