import { utf8Slice } from './bytes.js';
import { compareKeys, prefixOfUnits } from './canonical-rules.js';
import { KEY_DECODED } from './lexical-tape.js';
import { BACKSLASH } from './lexical-tokens.js';

// Key tokens of JSON text held as UTF-8 bytes `u`, each at [start, end) with its quotes. A token
// with a backslash, or with a byte past ASCII, is "decoded": it is compared by its decoded value.
// Every other token is ASCII, and its bytes are its UTF-16 code units.

/** The decoded key of the string token at [start, end). */
export function keyOf(u: Uint8Array, start: number, end: number): string {
  for (let k = start + 1; k < end - 1; k++) {
    if (u[k] === BACKSLASH) return JSON.parse(utf8Slice(u, start, end)) as string;
  }
  return utf8Slice(u, start + 1, end - 1);
}

/** Whether the key token at [start, end) decodes to `name` (ASCII). */
export function isKey(u: Uint8Array, start: number, end: number, decoded: boolean, name: string): boolean {
  if (decoded) return keyOf(u, start, end) === name;
  if (end - start - 2 !== name.length) return false;
  for (let k = 0; k < name.length; k++) if (u[start + 1 + k] !== name.charCodeAt(k)) return false;
  return true;
}

/**
 * Orders two key tokens by the UTF-16 code units of their decoded values: in place, byte by byte,
 * unless either is decoded.
 */
export function compareKeyTokens(
  u: Uint8Array,
  a: number,
  aEnd: number,
  b: number,
  bEnd: number,
  decoded: boolean,
): number {
  if (decoded) return compareKeys(keyOf(u, a, aEnd), keyOf(u, b, bEnd));
  const aLen = aEnd - a - 2;
  const bLen = bEnd - b - 2;
  const n = Math.min(aLen, bLen);
  for (let k = 1; k <= n; k++) {
    const d = (u[a + k] as number) - (u[b + k] as number);
    if (d !== 0) return d;
  }
  return aLen - bLen;
}

/**
 * The sort prefix (see `prefixOfUnits`) of the key token at [start, end): from its first two
 * bytes, or for a decoded token from its decoded value's first two code units.
 */
export function keyPrefix(u: Uint8Array, start: number, end: number, decoded: boolean): number {
  if (decoded) {
    const key = keyOf(u, start, end);
    return prefixOfUnits(key.length > 0 ? key.charCodeAt(0) : 0, key.length > 1 ? key.charCodeAt(1) : 0);
  }
  const len = end - start - 2;
  return prefixOfUnits(len > 0 ? (u[start + 1] as number) : 0, len > 1 ? (u[start + 2] as number) : 0);
}

/**
 * Orders the key tokens of two member records of a tape (see lexical-tape.ts): by their sort
 * prefixes, which decide most comparisons, then byte by byte, or by their decoded values.
 */
export function compareMembers(u: Uint8Array, tape: Int32Array, a: number, b: number): number {
  const d = (tape[a + 3] as number) - (tape[b + 3] as number);
  if (d !== 0) return d;
  const decoded = (((tape[a + 2] as number) | (tape[b + 2] as number)) & KEY_DECODED) !== 0;
  return compareKeyTokens(
    u,
    tape[a] as number,
    tape[a + 1] as number,
    tape[b] as number,
    tape[b + 1] as number,
    decoded,
  );
}
