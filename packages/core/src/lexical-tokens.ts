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
 * Whether `c`, read between the tokens of a container, is whitespace: in JSON text that
 * `JSON.parse` accepted, no other code unit up to 0x20 (not even the 0 after the text, which a
 * container never reaches) stands outside a string.
 */
export function isWsInside(c: number): boolean {
  return c <= 0x20;
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

/** Units of a string token read one by one before the rest is searched natively. */
const SHORT_STRING = 12;

/**
 * Where a text's next backslash is, as one native search found it: none in [from, at). Most
 * bodies hold no backslash, and then one search answers for the whole text.
 */
export class Backslashes {
  private from = 0;
  private at = -1;

  constructor(private readonly s: string) {}

  /** Whether the units in [from, to) of the text hold no backslash. */
  noneIn(from: number, to: number): boolean {
    if (from < this.from || from > this.at) {
      this.from = from;
      const at = this.s.indexOf('\\', from);
      this.at = at === -1 ? this.s.length : at;
    }
    return to <= this.at;
  }
}

/**
 * {@link stringEnd}, with the closing quote of a long token found by `indexOf` over `s` (the text
 * of `u`), which searches natively, when `backslashes` vouches that no backslash comes before it.
 */
export function longStringEnd(u: Uint16Array, s: string, backslashes: Backslashes, i: number): number {
  const stop = i + SHORT_STRING;
  for (let k = i + 1; k <= stop; k++) {
    const c = u[k] as number;
    if (c === QUOTE) return k + 1;
    if (c === BACKSLASH) return stringEnd(u, i);
  }
  const quote = s.indexOf('"', stop + 1);
  // No quote at all (never in text that JSON.parse accepted): the unit-by-unit read stops at the 0.
  return quote !== -1 && backslashes.noneIn(stop + 1, quote) ? quote + 1 : stringEnd(u, i);
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
 * The UTF-16 code units of `text`, followed by a 0 (a sentinel that ends any token) and
 * {@link COPY_SLACK} more: scanning a typed array is more than twice as fast as `charCodeAt`, and
 * the copy is one native call.
 */
export function unitsOf(text: string): Uint16Array {
  const n = text.length;
  let units = sharedUnits;
  let bytes = sharedUnitBytes;
  const size = n + 1 + COPY_SLACK;
  if (units.length < size) {
    units = new Uint16Array(Math.max(size, Math.min(SHARED_MAX, units.length * 2)));
    bytes = Buffer.from(units.buffer, units.byteOffset, units.byteLength);
    if (units.length <= SHARED_MAX) {
      sharedUnits = units;
      sharedUnitBytes = bytes;
    }
  }
  if (littleEndian) bytes.write(text, 0, n * 2, 'utf16le');
  else for (let k = 0; k < n; k++) units[k] = text.charCodeAt(k);
  units[n] = 0;
  return units.subarray(0, size);
}

/**
 * Units that {@link copyUnits} may read past the end of what it copies, and write past the end
 * of what it writes: {@link unitsOf} leaves that many after the sentinel, and output buffers
 * are made that much longer than their content.
 */
export const COPY_SLACK = 8;

/**
 * Copies the units [from, to) of `u` into `out` at `o`; returns the index after them. Eight at
 * a time, so it may copy up to seven units more: a token takes one or two rounds of a loop whose
 * exit is rarely mispredicted, where a copy unit by unit costs about one misprediction a token.
 */
export function copyUnits(u: Uint16Array, from: number, to: number, out: Uint16Array, o: number): number {
  const end = o + to - from;
  while (o < end) {
    out[o] = u[from] as number;
    out[o + 1] = u[from + 1] as number;
    out[o + 2] = u[from + 2] as number;
    out[o + 3] = u[from + 3] as number;
    out[o + 4] = u[from + 4] as number;
    out[o + 5] = u[from + 5] as number;
    out[o + 6] = u[from + 6] as number;
    out[o + 7] = u[from + 7] as number;
    o += 8;
    from += 8;
  }
  return end;
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
