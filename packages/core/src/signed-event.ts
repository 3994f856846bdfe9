import { canonicalJson, canonicalSignedData, hasOmittedKey } from './canonical-json.js';
import { checksumMessage, hmacHex } from './checksum.js';
import { encodeEnvelope } from './envelope.js';

/**
 * The exact body the service sends for an event: `{"event":"...","data":...,"checksum":"..."}`
 * with `data` in RFC 8785 form and no whitespace between members, its checksum keyed by the UTF-8
 * bytes of the receiving business's id (as `computeChecksum` computes it). This is the one writer
 * of the wire format: a payhook receiver reads its output on its fast path, and `parseEnvelope`
 * reads it back. A `checksum` key inside `data` is sent but not signed.
 *
 * Throws a `PayhookError` (`malformed_payload`) for data JSON cannot carry, as `canonicalJson` does.
 *
 * @example
 * ```ts
 * const body = encodeSignedEvent('payment.session.succeeded', payment, 'a3f1c2d4-...');
 * await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
 * ```
 */
export function encodeSignedEvent(event: string, data: unknown, businessId: string): string {
  const dataText = canonicalJson(data);
  // Without a key to leave out, the signed text is the sent text: one encoding, not two.
  const signed = hasOmittedKey(data) ? canonicalSignedData(data) : dataText;
  return encodeEnvelope(event, dataText, hmacHex(checksumMessage(event, signed), businessId));
}
