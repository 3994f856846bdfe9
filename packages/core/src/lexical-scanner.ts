import { depthLimit, duplicateKey, OMITTED_DATA_KEY, tooDeep } from './canonical-rules.js';
import type { PayhookError } from './errors.js';
import { compareKeyTokens, compareMembers, isKey, keyOf, keyPrefix } from './lexical-keys.js';
import { sortMembers } from './lexical-sort.js';
import {
  beginRead,
  emit,
  KEY_DECODED,
  KEY_OMITTED,
  KIND_ARRAY,
  KIND_OBJECT,
  KIND_TOKEN,
  MEMBER,
  NODE,
  outFor,
  tapeFor,
  VERBATIM,
} from './lexical-tape.js';
import { TextBytes } from './lexical-text.js';
import {
  CLOSE_BRACE,
  CLOSE_BRACKET,
  COLON,
  COMMA,
  COPY_SLACK,
  END,
  firstDifference,
  isAscii,
  isWs,
  isWsInside,
  OPEN_BRACE,
  OPEN_BRACKET,
  QUOTE,
  scalarEnd,
} from './lexical-tokens.js';

// What a read leaves out or looks for: nothing; a `checksum` key at the top of `data`; the `data`
// member of a whole body, whose node is kept.
const PLAIN = 0;
const SIGNED_DATA = 1;
const ENVELOPE = 2;

const EMPTY = new Int32Array(0);

/**
 * A cursor over the UTF-8 bytes of JSON text that `JSON.parse` has already validated, so it only
 * has to find structure: it never re-validates tokens, which keeps the verify path close to one
 * `JSON.parse`. {@link verbatim} checks, allocating nothing, that a value is canonical already;
 * else the value is read once into the tape and its canonical bytes written out from it.
 *
 * The bytes it reads and writes live in buffers shared by every read: what it returns is a view,
 * good until the next read (see `readsBegun`).
 */
export class Scanner {
  /** A byte index into {@link u}. */
  i = 0;
  /** The text's UTF-8 bytes and what follows them (see `TextBytes`). */
  readonly u: Uint8Array;
  /** The text's length in bytes. */
  readonly length: number;
  private readonly text: TextBytes;
  // The tape and its length.
  private tape: Int32Array = EMPTY;
  private t = 0;
  /** The tape node of the `data` member an `Envelope` read found, or -1. */
  private dataNode = -1;
  /** The deepest nesting accepted: the caller's `maxDepth`, capped (see `depthLimit`). */
  readonly maxDepth: number;

  constructor(text: string, maxDepth: number) {
    beginRead();
    this.text = new TextBytes(text);
    this.u = this.text.u;
    this.length = this.text.length;
    this.maxDepth = depthLimit(maxDepth);
  }

  /** The index after the string token at `i`, its sign bit set if the token has an escape. */
  private stringEnd(i: number): number {
    return this.text.stringEnd(i);
  }

  /**
   * Whether the key token at [start, end), `escaped` or not, is compared by its decoded value:
   * it has an escape, or a byte past ASCII (in an all-ASCII text, none has).
   */
  private decoded(start: number, end: number, escaped: boolean): boolean {
    return escaped || (this.text.ascii === undefined && !isAscii(this.u, start + 1, end - 1));
  }

  /** Skips whitespace; returns the new position. */
  skipWs(): number {
    while (isWs(this.u[this.i] as number)) this.i++;
    return this.i;
  }

  /**
   * The canonical bytes of the value at `i` (no whitespace before it), leaving `i` after it: the
   * text's own bytes when {@link verbatim} finds them canonical, else read into the tape and
   * written out. A view into shared buffers, good until the next read.
   */
  canonicalBytes(depth: number, signedData: boolean): Uint8Array {
    const start = this.i;
    if (this.verbatim(depth, signedData)) return this.u.subarray(start, this.i);
    // verbatim may have stopped anywhere inside the value: read it again from its start.
    this.i = start;
    return this.bytesOfNode(this.read(depth, signedData ? SIGNED_DATA : PLAIN));
  }

  /**
   * Moves past the value at `i` and returns true if its text is already canonical (no whitespace,
   * keys in order, nothing to omit); false as soon as it is not, `i` then anywhere inside it. Throws
   * on nesting deeper than the limit. `omitChecksum`: this is `data`, its `checksum` key left out.
   * Keys in strictly ascending order cannot repeat, so a value this accepts has no duplicate keys.
   */
  verbatim(depth: number, omitChecksum: boolean): boolean {
    const u = this.u;
    let i = this.i;
    const c = u[i] as number;
    if (c === QUOTE) {
      this.i = this.stringEnd(i) & END;
      return true;
    }
    if (c !== OPEN_BRACE && c !== OPEN_BRACKET) {
      if (isWs(c)) return false;
      this.i = scalarEnd(u, i);
      return true;
    }
    if (depth >= this.maxDepth) throw tooDeep('The body', this.maxDepth);
    const object = c === OPEN_BRACE;
    const close = object ? CLOSE_BRACE : CLOSE_BRACKET;
    i++;
    if (u[i] === close) {
      this.i = i + 1;
      return true;
    }
    // Keys are compared in place (no string is made) unless one of them has an escape.
    let prevStart = -1;
    let prevEnd = -1;
    let prevDecoded = false;
    for (;;) {
      if (object) {
        const keyStart = i;
        if (u[keyStart] !== QUOTE) return false; // whitespace
        const end = this.stringEnd(i);
        const keyEnd = end & END;
        const decoded = this.decoded(keyStart, keyEnd, end < 0);
        if (omitChecksum && isKey(u, keyStart, keyEnd, decoded, OMITTED_DATA_KEY)) return false;
        if (prevStart !== -1) {
          // The first characters decide most comparisons.
          const d = decoded || prevDecoded ? 0 : firstDifference(u, prevStart, keyStart);
          if (d > 0) return false;
          if (
            d === 0 &&
            compareKeyTokens(u, prevStart, prevEnd, keyStart, keyEnd, decoded || prevDecoded) >= 0
          ) {
            return false;
          }
        }
        prevStart = keyStart;
        prevEnd = keyEnd;
        prevDecoded = decoded;
        if (u[keyEnd] !== COLON) return false;
        i = keyEnd + 1;
      }
      const v = u[i] as number;
      if (v === QUOTE) i = this.stringEnd(i) & END;
      else if (v === OPEN_BRACE || v === OPEN_BRACKET) {
        this.i = i;
        if (!this.verbatim(depth + 1, false)) return false;
        i = this.i;
      } else {
        if (isWs(v)) return false;
        i = scalarEnd(u, i);
      }
      const d = u[i++];
      if (d === close) {
        this.i = i;
        return true;
      }
      if (d !== COMMA) return false;
    }
  }

  /**
   * Reads the value at `i` (no whitespace before it) into the tape, checking depth and duplicate
   * keys on the way; returns its node. Tokens inside containers are read in the container's loop,
   * with a local cursor. An `Envelope` read is of the body's top level, which counts no depth and
   * whose duplicate keys are found once all its members are read.
   */
  private scan(depth: number, mode: number): number {
    const u = this.u;
    const tape = this.tape;
    // The tape's length is kept in a local, and handed over around the recursive call.
    let t = this.t;
    const node = t;
    t += NODE;
    let i = this.i;
    const start = i;
    const c = u[i] as number;
    if (c !== OPEN_BRACE && c !== OPEN_BRACKET) {
      i = c === QUOTE ? this.stringEnd(i) & END : scalarEnd(u, i);
      tape[node] = KIND_TOKEN | VERBATIM;
      tape[node + 1] = start;
      tape[node + 2] = i;
      tape[node + 3] = t;
      this.t = t;
      this.i = i;
      return node;
    }
    if (depth >= this.maxDepth && mode !== ENVELOPE) throw tooDeep('The body', this.maxDepth);
    const object = c === OPEN_BRACE;
    const close = object ? CLOSE_BRACE : CLOSE_BRACKET;
    // An envelope's subtree stays on the tape: its `data` node is written out from there.
    let verbatim = mode !== ENVELOPE;
    let order = 0;
    let count = 0;
    i++;
    // Whether the keys so far are in strictly ascending (canonical) or strictly descending order.
    let ascending = verbatim;
    let descending = verbatim;
    let prev = -1;
    let prevPrefix = 0;
    for (;;) {
      let w = u[i] as number;
      if (isWsInside(w)) {
        verbatim = false;
        do w = u[++i] as number;
        while (isWsInside(w));
      }
      if (count === 0 && w === close) {
        i++;
        break;
      }
      let inner = PLAIN;
      if (object) {
        const member = t;
        t += MEMBER;
        const keyStart = i;
        const end = this.stringEnd(i);
        i = end & END;
        const decoded = this.decoded(keyStart, i, end < 0);
        let flags = decoded ? KEY_DECODED : 0;
        if (mode === SIGNED_DATA) {
          if (isKey(u, keyStart, i, decoded, OMITTED_DATA_KEY)) {
            flags |= KEY_OMITTED;
            verbatim = false;
          }
        } else if (mode === ENVELOPE && isKey(u, keyStart, i, decoded, 'data')) {
          inner = SIGNED_DATA;
        }
        const prefix = keyPrefix(u, keyStart, i, decoded);
        tape[member] = keyStart;
        tape[member + 1] = i;
        tape[member + 2] = flags;
        tape[member + 3] = prefix;
        if ((ascending || descending) && prev !== -1) {
          let cmp = prefix - prevPrefix;
          if (cmp === 0) cmp = compareMembers(u, tape, member, prev);
          if (cmp === 0) throw this.duplicateAt(member);
          if (cmp < 0) {
            ascending = false;
            verbatim = false;
          } else {
            descending = false;
          }
        }
        prev = member;
        prevPrefix = prefix;
        w = u[i] as number;
        if (isWsInside(w)) {
          verbatim = false;
          do w = u[++i] as number;
          while (isWsInside(w));
        }
        w = u[++i] as number; // after the ':'
        if (isWsInside(w)) {
          verbatim = false;
          do w = u[++i] as number;
          while (isWsInside(w));
        }
      }
      const v = u[i] as number;
      if (v === OPEN_BRACE || v === OPEN_BRACKET) {
        this.i = i;
        this.t = t;
        const child = this.scan(depth + 1, inner);
        t = this.t;
        if (((tape[child] as number) & VERBATIM) === 0) verbatim = false;
        if (inner === SIGNED_DATA) this.dataNode = child;
        i = this.i;
      } else {
        // A token, read here rather than through a call.
        const value = t;
        t += NODE;
        const valueStart = i;
        i = v === QUOTE ? this.stringEnd(i) & END : scalarEnd(u, i);
        tape[value] = KIND_TOKEN | VERBATIM;
        tape[value + 1] = valueStart;
        tape[value + 2] = i;
        tape[value + 3] = t;
        if (inner === SIGNED_DATA) this.dataNode = value;
      }
      count++;
      w = u[i] as number;
      if (isWsInside(w)) {
        verbatim = false;
        do w = u[++i] as number;
        while (isWsInside(w));
      }
      i++;
      if (w === close) break;
    }
    if (verbatim) {
      // A verbatim subtree is copied from the text: what the tape holds of it is not needed.
      t = node + NODE;
    } else if (object) {
      // The members in text order (each found after the subtree of the one before), reversed if
      // they were in descending order, else sorted unless they were in order already.
      order = t;
      t += count;
      const back = descending && !ascending;
      let member = node + NODE;
      for (let k = 0; k < count; k++) {
        tape[back ? t - 1 - k : order + k] = member;
        member = tape[member + MEMBER + 3] as number;
      }
      if (!ascending && !descending) {
        sortMembers(
          tape,
          order,
          count,
          (a, b) => compareMembers(u, tape, a, b),
          (m) => this.duplicateAt(m),
        );
      }
    }
    tape[node] = (object ? KIND_OBJECT : KIND_ARRAY) | (verbatim ? VERBATIM : 0);
    tape[node + 1] = start;
    tape[node + 2] = i;
    tape[node + 3] = t;
    tape[node + 4] = order;
    tape[node + 5] = count;
    this.t = t;
    this.i = i;
    return node;
  }

  private duplicateAt(member: number): PayhookError {
    const t = this.tape;
    return duplicateKey(keyOf(this.u, t[member] as number, t[member + 1] as number));
  }

  /** The canonical bytes of a node of the tape (a view, see {@link canonicalBytes}). */
  private bytesOfNode(node: number): Uint8Array {
    const tape = this.tape;
    const start = tape[node + 1] as number;
    const end = tape[node + 2] as number;
    if (((tape[node] as number) & VERBATIM) !== 0) return this.u.subarray(start, end);
    // The canonical text is never longer than the text it comes from.
    const out = outFor(end - start + COPY_SLACK);
    return out.bytes.subarray(0, emit(this.text.view, tape, node, out.view, 0));
  }

  /**
   * The canonical bytes of the `data` member of the body at `i` (see `lexicalEnvelope`), if any
   * (a view, see {@link canonicalBytes}).
   */
  envelopeData(): Uint8Array | undefined {
    this.dataNode = -1;
    this.read(0, ENVELOPE);
    return this.dataNode === -1 ? undefined : this.bytesOfNode(this.dataNode);
  }

  /** Reads the value at `i` into a tape large enough for anything the rest of the text may hold. */
  private read(depth: number, mode: number): number {
    // Each node, member record and order entry stands for at least one character of text (a
    // token and its delimiter, a key and its colon): three ints per character is always enough.
    this.tape = tapeFor(3 * (this.length - this.i) + NODE);
    this.t = 0;
    return this.scan(depth, mode);
  }
}
