/*
 * Tokens of JSON text that `JSON.parse` has already accepted, read over its UTF-16 code units
 * (see decisions.md, "Lexical canonicalization assumes `JSON.parse` ran first").
 */

export const OPEN_BRACE = 0x7b;
export const CLOSE_BRACE = 0x7d;
export const OPEN_BRACKET = 0x5b;
export const CLOSE_BRACKET = 0x5d;
export const QUOTE = 0x22;
export const BACKSLASH = 0x5c;
export const COMMA = 0x2c;
export const COLON = 0x3a;

export function isWs(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/**
 * How the first characters of two unescaped key tokens (at their quotes) compare, or 0 if that
 * does not decide (equal, or a key is empty: its "first character" is the closing quote).
 */
export function firstDifference(u: Uint16Array, a: number, b: number): number {
  const x = u[a + 1] as number;
  const y = u[b + 1] as number;
  return x === QUOTE || y === QUOTE ? 0 : x - y;
}

/** Masks the end index out of what {@link stringEnd} returns. */
export const END = 0x7fffffff;

/**
 * The index after the string token that starts (with its quote) at `i` in `u`; with the sign bit
 * set if the token holds a backslash (`& END` gives the index either way).
 */
export function stringEnd(u: Uint16Array, i: number): number {
  let escaped = 0;
  for (i++; ; i++) {
    const c = u[i] as number;
    if (c === QUOTE) return (i + 1) | escaped;
    if (c === BACKSLASH) {
      escaped = ~END;
      i++; // the escaped character, a quote perhaps
    }
  }
}

/** The index after the number or literal token at `i`: the next delimiter (or the 0 after the text). */
export function scalarEnd(u: Uint16Array, i: number): number {
  for (i++; ; i++) {
    const d = u[i] as number;
    if (d === COMMA || d === CLOSE_BRACE || d === CLOSE_BRACKET || d <= 0x20) return i;
  }
}

/**
 * Buffers are shared by every call (the scan is synchronous and never re-entered), kept up to
 * this many entries; a larger body gets buffers of its own for that call.
 */
export const SHARED_MAX = 1 << 20;

const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

let sharedUnits: Uint16Array = new Uint16Array(0);
let sharedUnitBytes: Buffer = Buffer.alloc(0);

/**
 * The UTF-16 code units of `text`, followed by a 0 (a sentinel that ends any token): scanning a
 * typed array is more than twice as fast as `charCodeAt`, and the copy is one native call.
 */
export function unitsOf(text: string): Uint16Array {
  const n = text.length;
  let units = sharedUnits;
  let bytes = sharedUnitBytes;
  if (units.length < n + 1) {
    units = new Uint16Array(Math.max(n + 1, Math.min(SHARED_MAX, units.length * 2)));
    bytes = Buffer.from(units.buffer, units.byteOffset, units.byteLength);
    if (units.length <= SHARED_MAX) {
      sharedUnits = units;
      sharedUnitBytes = bytes;
    }
  }
  if (littleEndian) bytes.write(text, 0, n * 2, 'utf16le');
  else for (let k = 0; k < n; k++) units[k] = text.charCodeAt(k);
  units[n] = 0;
  return units.subarray(0, n + 1);
}

/** The first `length` code units of `units` as a string. */
export function unitsToString(units: Uint16Array, length: number): string {
  if (littleEndian) return Buffer.from(units.buffer, units.byteOffset, length * 2).toString('utf16le');
  let s = '';
  for (let k = 0; k < length; k += 8192) {
    s += String.fromCharCode.apply(
      null,
      units.subarray(k, Math.min(length, k + 8192)) as unknown as number[],
    );
  }
  return s;
}
