import { allocBytes, bytesOver, writeUtf8 } from './bytes.js';
import { BACKSLASH, COPY_SLACK, QUOTE, SHARED_MAX, stringEnd } from './lexical-tokens.js';

/** Words (of 4 bytes) of a string token looked at before the rest is searched natively. */
const SHORT_WORDS = 3;

/**
 * The largest buffer kept between reads: room for a text of {@link SHARED_MAX} code units (a body
 * at the receiver's default limit), at the 3 bytes of UTF-8 a code unit may take. A larger text
 * gets a buffer of its own for its read.
 */
const SHARED_BYTES = 3 * SHARED_MAX + 1 + COPY_SLACK;

// The bytes of the text being read, and the same memory as 32-bit words: shared by every read.
let sharedBytes: Uint8Array = allocBytes(0);
let sharedWords = new Int32Array(0);
let sharedView = new DataView(sharedWords.buffer);

/** Repeats a byte in the four bytes of a word. */
const everyByte = (byte: number) => byte * 0x01010101;
const QUOTES = everyByte(QUOTE);
const BACKSLASHES = everyByte(BACKSLASH);
const ONES = everyByte(0x01);
const HIGH_BITS = everyByte(0x80);

/**
 * The UTF-8 bytes of a text being read, in a buffer shared by every read (a larger text gets its
 * own), and the search for the end of its string tokens. Scanning a typed array is more than
 * twice as fast as `charCodeAt`, the copy is one native call, and what the reader writes out from
 * these bytes is the UTF-8 the HMAC hashes, with no string in between.
 */
export class TextBytes {
  /**
   * The text's bytes, a 0 after them (a sentinel that ends any token) and {@link COPY_SLACK} more.
   * The buffer is not cut to the text (a view costs a tenth of a microsecond): what lies past the
   * slack is left from earlier texts.
   */
  readonly u: Uint8Array;
  /** The same memory as 32-bit words (`u` starts on a word). */
  private readonly words: Int32Array;
  /** The same memory as a view, from which `copyBytes` copies. */
  readonly view: DataView;
  /** The text's length in bytes. */
  readonly length: number;
  /**
   * The text if it is all ASCII (its indices are then the bytes', and a string's search is the
   * quicker), else undefined.
   */
  readonly ascii: string | undefined;
  /** The text's bytes and nothing after them, searched when the text is not all ASCII. */
  private readonly bytes: Uint8Array;
  // Where the next backslash is, as one native search found it: none in [from, at). Most bodies
  // hold no backslash, and then one search answers for the whole text.
  private backslashFrom = 0;
  private backslashAt = -1;

  constructor(text: string) {
    // A UTF-16 code unit takes at most 3 bytes of UTF-8.
    const room = text.length * 3 + 1 + COPY_SLACK;
    let u = sharedBytes;
    let words = sharedWords;
    let view = sharedView;
    if (u.length < room) {
      const memory = new ArrayBuffer((Math.max(room, Math.min(SHARED_BYTES, u.length * 2)) + 3) & ~3);
      u = bytesOver(memory);
      words = new Int32Array(memory);
      view = new DataView(memory);
      if (u.length <= SHARED_BYTES + 3) {
        sharedBytes = u;
        sharedWords = words;
        sharedView = view;
      }
    }
    const length = writeUtf8(u, text, 0);
    for (let k = length; k <= length + COPY_SLACK; k++) u[k] = 0;
    this.u = u;
    this.words = words;
    this.view = view;
    this.length = length;
    this.ascii = length === text.length ? text : undefined;
    this.bytes = this.ascii === undefined ? u.subarray(0, length) : u;
  }

  /**
   * The index after the string token that starts (with its quote) at `i`, its sign bit set if the
   * token holds a backslash (see `stringEnd`). The first bytes are read a word at a time (a quote
   * or a backslash in a word is found with a few integer operations, not a branch a byte); the
   * closing quote of a longer token is found by a native search when no backslash comes before it.
   */
  stringEnd(i: number): number {
    const { u, words } = this;
    let k = i + 1;
    for (; (k & 3) !== 0; k++) {
      const c = u[k] as number;
      if (c === QUOTE) return k + 1;
      if (c === BACKSLASH) return stringEnd(u, i);
    }
    const stop = k + 4 * SHORT_WORDS;
    for (; k < stop; k += 4) {
      const word = words[k >> 2] as number;
      // The high bit of each byte that is a quote or a backslash (the lowest such bit is exact:
      // a borrow only ever marks bytes above the first match).
      const q = word ^ QUOTES;
      const b = word ^ BACKSLASHES;
      const found = (((q - ONES) & ~q) | ((b - ONES) & ~b)) & HIGH_BITS;
      if (found !== 0) {
        const at = k + ((31 - Math.clz32(found & -found)) >> 3);
        return u[at] === QUOTE ? at + 1 : stringEnd(u, i);
      }
    }
    const quote = this.ascii !== undefined ? this.ascii.indexOf('"', stop) : this.bytes.indexOf(QUOTE, stop);
    // No quote at all (never in text that JSON.parse accepted): the byte-by-byte read stops at the 0.
    return quote !== -1 && this.noBackslashIn(stop, quote) ? quote + 1 : stringEnd(u, i);
  }

  /** Whether the bytes in [from, to) of the text hold no backslash. */
  private noBackslashIn(from: number, to: number): boolean {
    if (from < this.backslashFrom || from > this.backslashAt) {
      this.backslashFrom = from;
      const at =
        this.ascii !== undefined ? this.ascii.indexOf('\\', from) : this.bytes.indexOf(BACKSLASH, from);
      this.backslashAt = at === -1 ? this.length : at;
    }
    return to <= this.backslashAt;
  }
}
