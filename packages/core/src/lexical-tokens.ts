/*
 * Tokens of JSON text that `JSON.parse` has already accepted, read over its UTF-8 bytes (see
 * decisions.md, "Lexical canonicalization assumes `JSON.parse` ran first", and "The lexical
 * reader reads bytes"). Every byte of a character past ASCII is 0x80 or more, so no structural
 * byte (a quote, a backslash, a bracket, whitespace) is ever part of one.
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
 * Whether `c`, read between the tokens of a container, is whitespace: in JSON text that
 * `JSON.parse` accepted, no other byte up to 0x20 (not even the 0 after the text, which a
 * container never reaches) stands outside a string.
 */
export function isWsInside(c: number): boolean {
  return c <= 0x20;
}

/**
 * How the first characters of two unescaped key tokens (at their quotes) compare, or 0 if that
 * does not decide (equal, a key is empty: its "first character" is the closing quote, or either
 * begins past ASCII, where bytes do not order as UTF-16 code units do).
 */
export function firstDifference(u: Uint8Array, a: number, b: number): number {
  const x = u[a + 1] as number;
  const y = u[b + 1] as number;
  return x === QUOTE || y === QUOTE || (x | y) >= 0x80 ? 0 : x - y;
}

/** Masks the end index out of what {@link stringEnd} returns. */
export const END = 0x7fffffff;

/**
 * The index after the string token that starts (with its quote) at `i` in `u`; with the sign bit
 * set if the token holds a backslash (`& END` gives the index either way).
 */
export function stringEnd(u: Uint8Array, i: number): number {
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
export function scalarEnd(u: Uint8Array, i: number): number {
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

/**
 * Bytes that {@link copyBytes} may read past the end of what it copies, and write past the end
 * of what it writes: `TextBytes` leaves that many after the sentinel, and output buffers are made
 * that much longer than their content.
 */
export const COPY_SLACK = 8;

/**
 * Copies the bytes [from, to) of the text seen through `src` to `dst` at `o`; returns the index
 * after them. Eight at a time, as two 32-bit words through the views (which read and write at any
 * alignment), so it may copy up to seven bytes more: a token takes one or two rounds of a loop
 * whose exit is rarely mispredicted, where a copy byte by byte costs about one misprediction a
 * token, and a word is one load and one store where a byte is each of four.
 */
export function copyBytes(src: DataView, from: number, to: number, dst: DataView, o: number): number {
  const end = o + to - from;
  while (o < end) {
    dst.setUint32(o, src.getUint32(from, true), true);
    dst.setUint32(o + 4, src.getUint32(from + 4, true), true);
    o += 8;
    from += 8;
  }
  return end;
}

/**
 * Whether the bytes [from, to) of `u` are all ASCII: a key token that is not is compared by its
 * decoded value, since past ASCII, UTF-8's byte order is not the UTF-16 code unit order keys sort by.
 */
export function isAscii(u: Uint8Array, from: number, to: number): boolean {
  let high = 0;
  for (let k = from; k < to; k++) high |= u[k] as number;
  return high < 0x80;
}

/** Whether the bytes of `u` at `at` are those of `expected`. */
export function bytesAt(u: Uint8Array, at: number, expected: Uint8Array): boolean {
  for (let k = 0; k < expected.length; k++) if (u[at + k] !== expected[k]) return false;
  return true;
}
