import { compareKeys, compareKeyUnits, prefixOfUnits } from './canonical-rules.js';

// Key tokens of JSON text `s` (its code units `u`), each at [start, end) with its quotes;
// `escaped`: the token holds a backslash, and is decoded to be compared.

/** The decoded key of the string token at [start, end). */
export function keyOf(s: string, start: number, end: number, escaped: boolean): string {
  return escaped ? (JSON.parse(s.slice(start, end)) as string) : s.slice(start + 1, end - 1);
}

/** Whether the key token at [start, end) decodes to `name`. */
export function isKey(s: string, start: number, end: number, escaped: boolean, name: string): boolean {
  if (escaped) return keyOf(s, start, end, true) === name;
  return end - start - 2 === name.length && s.startsWith(name, start + 1);
}

/** Orders two key tokens by the UTF-16 code units of their decoded values. */
export function compareKeyTokens(
  s: string,
  u: Uint16Array,
  a: number,
  aEnd: number,
  b: number,
  bEnd: number,
  escaped: boolean,
): number {
  if (escaped) return compareKeys(keyOf(s, a, aEnd, true), keyOf(s, b, bEnd, true));
  return compareKeyUnits(u, a + 1, aEnd - a - 2, b + 1, bEnd - b - 2);
}

/** The sort prefix (see `keyPrefix`) of the escaped key token at [start, end). */
export function escapedKeyPrefix(s: string, start: number, end: number): number {
  const key = keyOf(s, start, end, true);
  return prefixOfUnits(key.length > 0 ? key.charCodeAt(0) : 0, key.length > 1 ? key.charCodeAt(1) : 0);
}
