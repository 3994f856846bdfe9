import { NodeBuffer } from './platform.js';

/*
 * Bytes without Buffer: UTF-8 through TextEncoder/TextDecoder and base64 written out here (no
 * atob/btoa, whose strings are Latin-1). Where Node's Buffer exists its native calls do the same
 * work, so the Node path costs what it did when it called Buffer directly.
 */

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A new array of `n` bytes, zero-filled (a Buffer on Node). */
export const allocBytes: (n: number) => Uint8Array = NodeBuffer
  ? (n) => (NodeBuffer as typeof Buffer).alloc(n)
  : (n) => new Uint8Array(n);

/** A new array of `n` bytes, contents unspecified (a pooled Buffer on Node). */
export const allocBytesUnsafe: (n: number) => Uint8Array = NodeBuffer
  ? (n) => (NodeBuffer as typeof Buffer).allocUnsafe(n)
  : (n) => new Uint8Array(n);

/** Bytes over the whole of `memory` (a Buffer on Node). */
export const bytesOver: (memory: ArrayBuffer) => Uint8Array = NodeBuffer
  ? (memory) => (NodeBuffer as typeof Buffer).from(memory)
  : (memory) => new Uint8Array(memory);

/** Writes `text` as UTF-8 into `u` from `at`; returns the bytes written. `u` has room for them. */
export const writeUtf8: (u: Uint8Array, text: string, at: number) => number = NodeBuffer
  ? (u, text, at) => (u as Buffer).write(text, at, 'utf8')
  : (u, text, at) => encoder.encodeInto(text, at === 0 ? u : u.subarray(at)).written;

/**
 * The text of the UTF-8 bytes [start, end) of `u` (invalid sequences become U+FFFD). `u` comes
 * from {@link allocBytes}, {@link allocBytesUnsafe} or {@link bytesOver} (or is any Uint8Array).
 */
export const utf8Slice: (u: Uint8Array, start: number, end: number) => string = NodeBuffer
  ? (u, start, end) =>
      (u instanceof (NodeBuffer as typeof Buffer)
        ? (u as Buffer)
        : (NodeBuffer as typeof Buffer).from(u.buffer, u.byteOffset, u.length)
      ).toString('utf8', start, end)
  : (u, start, end) => decoder.decode(u.subarray(start, end));

/** The UTF-8 bytes of `text`. */
export const utf8Bytes = (text: string): Uint8Array => encoder.encode(text);

/** The length of `text` in UTF-8 bytes. */
export function utf8Length(text: string): number {
  if (NodeBuffer) return NodeBuffer.byteLength(text, 'utf8');
  let n = text.length;
  for (let k = 0; k < text.length; k++) {
    const c = text.charCodeAt(k);
    if (c < 0x80) continue;
    if (c < 0x800) n += 1;
    else if (c >= 0xd800 && c <= 0xdbff && k + 1 < text.length) {
      const d = text.charCodeAt(k + 1);
      // A surrogate pair: 4 bytes for 2 code units.
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 2;
        k++;
      } else n += 2;
    } else n += 2;
  }
  return n;
}

/** `head` as UTF-8 followed by `tail` (UTF-8 if text), in one new array. */
export function joinBytes(head: string, tail: string | Uint8Array | undefined): Uint8Array {
  const tailBytes = tail === undefined ? undefined : typeof tail === 'string' ? utf8Bytes(tail) : tail;
  const headBytes = utf8Bytes(head);
  const out = new Uint8Array(headBytes.length + (tailBytes?.length ?? 0));
  out.set(headBytes, 0);
  if (tailBytes !== undefined) out.set(tailBytes, headBytes.length);
  return out;
}

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
/** The value of each base64 character, standard and URL-safe alike; -1 for any other. */
const VALUES = new Int8Array(128).fill(-1);
for (let k = 0; k < 64; k++) VALUES[ALPHABET.charCodeAt(k)] = k;
VALUES[0x2d] = 62; // '-'
VALUES[0x5f] = 63; // '_'

/** Standard base64 of `bytes`, padded. */
export function base64Of(bytes: Uint8Array): string {
  if (NodeBuffer) return NodeBuffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('base64');
  let out = '';
  let k = 0;
  for (; k + 2 < bytes.length; k += 3) {
    const n = ((bytes[k] as number) << 16) | ((bytes[k + 1] as number) << 8) | (bytes[k + 2] as number);
    out += `${ALPHABET[n >>> 18]}${ALPHABET[(n >>> 12) & 63]}${ALPHABET[(n >>> 6) & 63]}${ALPHABET[n & 63]}`;
  }
  const rest = bytes.length - k;
  if (rest === 1) {
    const n = (bytes[k] as number) << 16;
    out += `${ALPHABET[n >>> 18]}${ALPHABET[(n >>> 12) & 63]}==`;
  } else if (rest === 2) {
    const n = ((bytes[k] as number) << 16) | ((bytes[k + 1] as number) << 8);
    out += `${ALPHABET[n >>> 18]}${ALPHABET[(n >>> 12) & 63]}${ALPHABET[(n >>> 6) & 63]}=`;
  }
  return out;
}

/**
 * The bytes of base64 text (standard or URL-safe, padded or not), or undefined if it is not base64:
 * a character outside the alphabets, padding anywhere but at the end, or a length no encoding gives.
 * Checks the text first, then decodes it natively where it can.
 */
export function bytesOfBase64(text: string): Uint8Array | undefined {
  let end = text.length;
  if (end > 0 && text.charCodeAt(end - 1) === 0x3d) end--;
  if (end > 0 && text.charCodeAt(end - 1) === 0x3d) end--;
  if (end % 4 === 1 || (end !== text.length && text.length % 4 !== 0)) return undefined;
  for (let k = 0; k < end; k++) {
    const c = text.charCodeAt(k);
    if (c >= 128 || (VALUES[c] as number) < 0) return undefined;
  }
  if (NodeBuffer) return NodeBuffer.from(text, 'base64');
  const out = new Uint8Array((end * 3) >>> 2);
  let o = 0;
  let k = 0;
  for (; k + 4 <= end; k += 4) {
    const n =
      ((VALUES[text.charCodeAt(k)] as number) << 18) |
      ((VALUES[text.charCodeAt(k + 1)] as number) << 12) |
      ((VALUES[text.charCodeAt(k + 2)] as number) << 6) |
      (VALUES[text.charCodeAt(k + 3)] as number);
    out[o++] = n >>> 16;
    out[o++] = (n >>> 8) & 255;
    out[o++] = n & 255;
  }
  if (end - k >= 2) {
    const n =
      ((VALUES[text.charCodeAt(k)] as number) << 18) |
      ((VALUES[text.charCodeAt(k + 1)] as number) << 12) |
      (end - k === 3 ? (VALUES[text.charCodeAt(k + 2)] as number) << 6 : 0);
    out[o++] = n >>> 16;
    if (end - k === 3) out[o++] = (n >>> 8) & 255;
  }
  return out;
}

/** Whether two byte arrays are equal, in time that depends only on their lengths. */
export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let d = 0;
  for (let k = 0; k < a.length; k++) d |= (a[k] as number) ^ (b[k] as number);
  return d === 0;
}
