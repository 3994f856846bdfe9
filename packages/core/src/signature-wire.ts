import { bytesOfBase64, joinBytes } from './bytes.js';

/*
 * What Standard Webhooks puts on the wire, read and written the same way by every signer and
 * verifier of the package: the signed content (`id.timestamp.body`), the timestamp's form, and
 * the `webhook-signature` header's entries (`v1,<base64>` HMAC-SHA256, `v1a,<base64>` Ed25519,
 * space-separated).
 */

/** What the signed content holds before the body: `id.timestamp.`. */
export const signedHead = (id: string, timestamp: string): string => `${id}.${timestamp}.`;

/** The bytes a signature covers, `id.timestamp.body`, in one new array. */
export const signedContent = (id: string, timestamp: string, body: string | Uint8Array): Uint8Array =>
  joinBytes(signedHead(id, timestamp), body);

/**
 * Whether a `webhook-timestamp` is whole seconds as Standard Webhooks writes them: 1 to 12 ASCII
 * digits (a loop: the regular expression it replaces cost more than the comparison it guards).
 */
export function isTimestampText(timestamp: string): boolean {
  if (timestamp.length === 0 || timestamp.length > 12) return false;
  for (let k = 0; k < timestamp.length; k++) {
    const c = timestamp.charCodeAt(k);
    if (c < 0x30 || c > 0x39) return false;
  }
  return true;
}

/** Bytes of a `v1` (HMAC-SHA256) signature. */
export const SIGNATURE_BYTES = 32;
/** Bytes of a `v1a` (Ed25519) signature. */
export const ED25519_SIGNATURE_BYTES = 64;

/** A signature scheme of the `webhook-signature` header. */
export type SignatureScheme = 'v1' | 'v1a';

/** The most signatures of a scheme read from one header: more is not from a sender with a few keys in rotation. */
export const MAX_LISTED = 16;

/**
 * Where the signatures {@link listSignatures} found last are in their header: the base64 text of
 * the k-th at [listed[2k], listed[2k + 1]). Shared by every call: read it before the next one.
 */
export const listed = new Int32Array(2 * MAX_LISTED);

/**
 * Finds the signatures of `scheme` a header lists whose base64 text (padded or not) has the
 * length of a signature of that scheme, at most {@link MAX_LISTED}, and notes where they are in
 * {@link listed}; returns how many. The one reader of the header: the header is walked by index,
 * nothing is split or decoded (splitting it and decoding each entry cost a tenth of a 1 KB verify
 * on node:crypto); a path that needs the bytes decodes them with {@link decodeListed}.
 */
export function listSignatures(header: string, scheme: SignatureScheme): number {
  const prefix = scheme === 'v1' ? 'v1,' : 'v1a,';
  const bytes = scheme === 'v1' ? SIGNATURE_BYTES : ED25519_SIGNATURE_BYTES;
  let count = 0;
  for (let from = 0; from <= header.length && count < MAX_LISTED; ) {
    let to = header.indexOf(' ', from);
    if (to === -1) to = header.length;
    if (header.startsWith(prefix, from)) {
      // The bytes the text stands for, as base64 counts them: padding does not count.
      let n = to - from - prefix.length;
      if (n > 0 && header.charCodeAt(to - 1) === 0x3d) n--;
      if (n > 1 && header.charCodeAt(to - 2) === 0x3d) n--;
      if ((n * 3) >>> 2 === bytes) {
        listed[2 * count] = from + prefix.length;
        listed[2 * count + 1] = to;
        count++;
      }
    }
    from = to + 1;
  }
  return count;
}

/**
 * The first `count` signatures {@link listSignatures} found in `header`, decoded; those that are
 * not base64 (standard or URL-safe) of `bytes` bytes are left out.
 */
export function decodeListed(header: string, count: number, bytes: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let k = 0; k < count; k++) {
    const decoded = bytesOfBase64(header.slice(listed[2 * k], listed[2 * k + 1]));
    if (decoded !== undefined && decoded.length === bytes) out.push(decoded);
  }
  return out;
}

/** The signatures of `scheme` a header lists, decoded, at most {@link MAX_LISTED}. */
export const signaturesOf = (header: string, scheme: SignatureScheme): Uint8Array[] =>
  decodeListed(
    header,
    listSignatures(header, scheme),
    scheme === 'v1' ? SIGNATURE_BYTES : ED25519_SIGNATURE_BYTES,
  );
