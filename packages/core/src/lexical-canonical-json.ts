import { PayhookError } from './errors.js';

/** Options of {@link lexicalCanonicalJson}. */
export interface LexicalOptions {
  /** Deepest nesting of objects and arrays accepted (default 64, at most 1,000 whatever is asked). */
  maxDepth?: number;
}

export const DEFAULT_MAX_DEPTH = 64;

/**
 * The deepest nesting any `maxDepth` can ask for: the scanner recurses once per level, and 1,000
 * levels stay far inside the default stack (it runs out past about 3,000), so a larger or
 * infinite `maxDepth` still ends in a `PayhookError`, never a stack overflow.
 */
export const MAX_LEXICAL_DEPTH = 1000;

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Decodes a raw body as UTF-8; invalid UTF-8 is a malformed payload, never a replacement character. */
export function decodeUtf8(raw: string | Uint8Array): string {
  if (typeof raw === 'string') return raw;
  try {
    return utf8.decode(raw);
  } catch (cause) {
    throw new PayhookError('malformed_payload', 'The body is not valid UTF-8.', { cause });
  }
}

/**
 * Canonical form of raw JSON text that keeps every token as its sender wrote it: keys sorted at
 * every depth (by the UTF-16 code units of the decoded key), insignificant whitespace dropped, and
 * every string and number token left exactly as written (`"\/"`, `"\u00e9"` and `1.0` survive).
 * This reproduces the checksum of any sender that sorted keys and signed its own serialization
 * (PHP's `json_encode`, for instance), which RFC 8785 re-encoding would not.
 *
 * Throws a `PayhookError` with code `malformed_payload` for invalid JSON, duplicate keys, or
 * nesting deeper than `maxDepth` (or than 1,000 levels, whatever `maxDepth` says).
 *
 * @example
 * ```ts
 * lexicalCanonicalJson('{ "b": 1.0, "a": "\\/path" }'); // '{"a":"\\/path","b":1.0}'
 * ```
 */
export function lexicalCanonicalJson(raw: string | Uint8Array, options: LexicalOptions = {}): string {
  const text = decodeUtf8(raw);
  parseJson(text);
  const maxDepth = options.maxDepth ?? DEFAULT_MAX_DEPTH;
  const units = unitsOf(text);
  const scanner = new Scanner(text, units, maxDepth);
  const start = scanner.skipWs();
  if (scanner.verbatim(0, false)) return text.slice(start, scanner.i);
  return new Scanner(text, units, maxDepth, start).canonical(0, false);
}

/** `JSON.parse` whose failure is a `PayhookError` with code `malformed_payload`. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (cause) {
    throw new PayhookError('malformed_payload', `The body is not valid JSON: ${(cause as Error).message}`, {
      cause,
    });
  }
}

/** What a lexical read of a webhook body finds at its top level. */
export interface LexicalEnvelope {
  /** Canonical text of `data` without a top-level `checksum` key, or undefined if absent. */
  data: string | undefined;
}

/**
 * Reads a webhook body `{"event", "data", "checksum"}` that `JSON.parse` has already accepted,
 * and returns the lexical canonical text of its `data` member (a top-level `checksum` key inside
 * `data` left out). Checks duplicate keys and depth over the whole body.
 *
 * `data` that is canonical already (what an RFC 8785 sender writes) costs one scan that allocates
 * nothing and is taken verbatim; any other is read once into a tape of token positions and written
 * out from it in key order. A body in the sender's own layout has its three members matched as
 * text rather than read as arbitrary members.
 */
export function lexicalEnvelope(text: string, maxDepth: number = DEFAULT_MAX_DEPTH): LexicalEnvelope {
  const units = unitsOf(text);
  const scanner = new Scanner(text, units, maxDepth);
  const laidOut = senderLayoutData(scanner);
  if (laidOut !== undefined) return { data: laidOut };
  scanner.i = 0;
  scanner.skipWs();
  if (units[scanner.i] !== OPEN_BRACE) return { data: undefined };
  scanner.i++;
  let data: string | undefined;
  const keys: string[] = [];
  scanner.skipWs();
  if (units[scanner.i] === CLOSE_BRACE) return { data: undefined };
  for (;;) {
    scanner.skipWs();
    const key = scanner.readKey();
    keys.push(key);
    scanner.skipWs();
    scanner.i++; // ':'
    scanner.skipWs();
    const start = scanner.i;
    if (scanner.verbatim(1, key === 'data')) {
      if (key === 'data') data = text.slice(start, scanner.i);
    } else {
      // A fresh scanner: the first one may have stopped anywhere inside the value.
      const reader = new Scanner(text, units, maxDepth, start);
      if (key === 'data') data = reader.canonical(1, true);
      else reader.validate(1);
      scanner.i = reader.i;
    }
    scanner.skipWs();
    if (units[scanner.i++] === CLOSE_BRACE) break;
  }
  assertUnique(keys);
  return { data };
}

/**
 * The lexical text of `data` for a body in the sender's own layout,
 * `{"event":"...","data":...,"checksum":"..."}` with no whitespace between members (what
 * `JSON.stringify` writes); undefined for any other layout, which the general loop of
 * {@link lexicalEnvelope} then reads. Same result, same checks (duplicate keys and depth inside
 * `data`; `event` and `checksum` are strings, which hold neither), without the bookkeeping of
 * arbitrary members: the three keys are matched as text and are distinct.
 */
function senderLayoutData(scanner: Scanner): string | undefined {
  const { s: text, u: units } = scanner;
  if (!text.startsWith('{"event":"')) return undefined;
  let i = stringEnd(units, 9) & END;
  if (!text.startsWith(',"data":', i)) return undefined;
  const start = i + 8;
  if (isWs(units[start] as number)) return undefined;
  scanner.i = start;
  let data: string;
  if (scanner.verbatim(1, true)) {
    data = text.slice(start, scanner.i);
    i = scanner.i;
  } else {
    // A fresh scanner: the first one may have stopped anywhere inside the value.
    const reader = new Scanner(text, units, scanner.maxDepth, start);
    data = reader.canonical(1, true);
    i = reader.i;
  }
  if (!text.startsWith(',"checksum":"', i)) return undefined;
  i = stringEnd(units, i + 12) & END;
  return units[i] === CLOSE_BRACE ? data : undefined;
}

const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;

function isWs(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/**
 * How the first characters of two unescaped key tokens (at their quotes) compare, or 0 if that
 * does not decide (equal, or a key is empty: its "first character" is the closing quote).
 */
function firstDifference(u: Uint16Array, a: number, b: number): number {
  const x = u[a + 1] as number;
  const y = u[b + 1] as number;
  return x === QUOTE || y === QUOTE ? 0 : x - y;
}

/** Masks the end index out of what {@link stringEnd} returns. */
const END = 0x7fffffff;

/**
 * The index after the string token that starts (with its quote) at `i` in `u`; with the sign bit
 * set if the token holds a backslash (`& END` gives the index either way).
 */
function stringEnd(u: Uint16Array, i: number): number {
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
function scalarEnd(u: Uint16Array, i: number): number {
  for (i++; ; i++) {
    const d = u[i] as number;
    if (d === COMMA || d === CLOSE_BRACE || d === CLOSE_BRACKET || d <= 0x20) return i;
  }
}

function assertUnique(keys: string[]): void {
  keys.sort();
  for (let k = 1; k < keys.length; k++) {
    if (keys[k] === keys[k - 1]) throw duplicateKey(keys[k] as string);
  }
}

function duplicateKey(key: string): PayhookError {
  return new PayhookError(
    'malformed_payload',
    `The body has the key ${JSON.stringify(key)} twice in one object; a payload with duplicate keys is refused because different parsers would read different values.`,
  );
}

/*
 * The tape: what `Scanner.scan` learns of a value, so that it is read once and written out in key
 * order without a second read. Every value is a node of NODE ints:
 *   [kind | VERBATIM?, start, end, next, order, count]
 * `start`/`end` bound its text, `next` is the tape index after its subtree. A node marked VERBATIM
 * (every token; a container with no whitespace, keys in order and nothing to leave out) is copied
 * from the text as it is, and its subtree is dropped from the tape. An array's `count` items
 * follow its node; an object's members follow as [keyStart, keyEnd, keyFlags] then the value's
 * node, and `order` is where the tape lists its members' indices in canonical order.
 */
const NODE = 6;
const MEMBER = 3;
const KIND_TOKEN = 1;
const KIND_ARRAY = 2;
const KIND_OBJECT = 3;
const KIND_MASK = 3;
const VERBATIM = 4;
const KEY_ESCAPED = 1;
const KEY_OMITTED = 2;
/** Objects with more members than this are sorted with Array#sort rather than by insertion. */
const INSERTION_SORT_MAX = 16;

// Buffers shared by every call (the scan is synchronous and never re-entered), kept up to
// SHARED_MAX entries; a larger body gets buffers of its own for that call.
const SHARED_MAX = 1 << 20;
let sharedTape: Int32Array = new Int32Array(0);
let sharedStack: Int32Array = new Int32Array(0);
let sharedOut: Uint16Array = new Uint16Array(0);

function int32s(shared: Int32Array, n: number): Int32Array {
  return shared.length >= n ? shared : new Int32Array(n);
}

const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

let sharedUnits: Uint16Array = new Uint16Array(0);
let sharedUnitBytes: Buffer = Buffer.alloc(0);

/**
 * The UTF-16 code units of `text`, followed by a 0 (a sentinel that ends any token): scanning a
 * typed array is more than twice as fast as `charCodeAt`, and the copy is one native call.
 */
function unitsOf(text: string): Uint16Array {
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
function unitsToString(units: Uint16Array, length: number): string {
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

/**
 * A cursor over JSON text that `JSON.parse` has already validated, so it only has to find
 * structure: it never re-validates tokens, which keeps the verify path close to one `JSON.parse`.
 */
class Scanner {
  i: number;
  /** The tape, its length, and a stack of the member records of the objects being read. */
  private tape = sharedTape;
  private t = 0;
  private stack = sharedStack;
  private sp = 0;
  /** The deepest nesting accepted: the caller's `maxDepth`, at most {@link MAX_LEXICAL_DEPTH}. */
  readonly maxDepth: number;

  constructor(
    readonly s: string,
    /** The code units of `s` and a 0 after them (see {@link unitsOf}). */
    readonly u: Uint16Array,
    maxDepth: number,
    start = 0,
  ) {
    this.i = start;
    // NaN (a nonsense option) would make every depth check false: it takes the ceiling too.
    this.maxDepth = Number.isNaN(maxDepth) ? MAX_LEXICAL_DEPTH : Math.min(maxDepth, MAX_LEXICAL_DEPTH);
  }

  /** Skips whitespace; returns the new position. */
  skipWs(): number {
    const u = this.u;
    let i = this.i;
    for (;;) {
      const c = u[i] as number;
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
      else break;
    }
    this.i = i;
    return i;
  }

  /** Moves past the string token at `i` (an opening quote); returns whether it held a backslash. */
  private skipString(): boolean {
    const end = stringEnd(this.u, this.i);
    this.i = end & END;
    return end < 0;
  }

  /** Reads an object key token and returns its decoded value. */
  readKey(): string {
    const start = this.i;
    const escaped = this.skipString();
    return escaped
      ? (JSON.parse(this.s.slice(start, this.i)) as string)
      : this.s.slice(start + 1, this.i - 1);
  }

  /** The decoded key of the string token at [start, end). */
  private key(start: number, end: number, escaped: boolean): string {
    return escaped ? (JSON.parse(this.s.slice(start, end)) as string) : this.s.slice(start + 1, end - 1);
  }

  /** Whether the key token at [start, end) decodes to `name`. */
  private isKey(start: number, end: number, escaped: boolean, name: string): boolean {
    if (escaped) return this.key(start, end, true) === name;
    return end - start - 2 === name.length && this.s.startsWith(name, start + 1);
  }

  /** Orders two key tokens by the UTF-16 code units of their decoded values. */
  private compareKeys(
    aStart: number,
    aEnd: number,
    aEsc: boolean,
    bStart: number,
    bEnd: number,
    bEsc: boolean,
  ): number {
    if (aEsc || bEsc) {
      const a = this.key(aStart, aEnd, aEsc);
      const b = this.key(bStart, bEnd, bEsc);
      return a < b ? -1 : a > b ? 1 : 0;
    }
    const u = this.u;
    const aLen = aEnd - aStart - 2;
    const bLen = bEnd - bStart - 2;
    const n = Math.min(aLen, bLen);
    for (let k = 1; k <= n; k++) {
      const d = (u[aStart + k] as number) - (u[bStart + k] as number);
      if (d !== 0) return d;
    }
    return aLen - bLen;
  }

  /** Orders the key tokens of two member records of the tape. */
  private compareMembers(a: number, b: number): number {
    const tape = this.tape;
    const aStart = tape[a] as number;
    const bStart = tape[b] as number;
    const aFlags = tape[a + 2] as number;
    const bFlags = tape[b + 2] as number;
    if (((aFlags | bFlags) & KEY_ESCAPED) === 0) {
      const u = this.u;
      const aLen = (tape[a + 1] as number) - aStart - 2;
      const bLen = (tape[b + 1] as number) - bStart - 2;
      const n = Math.min(aLen, bLen);
      for (let k = 1; k <= n; k++) {
        const d = (u[aStart + k] as number) - (u[bStart + k] as number);
        if (d !== 0) return d;
      }
      return aLen - bLen;
    }
    return this.compareKeys(aStart, tape[a + 1] as number, true, bStart, tape[b + 1] as number, true);
  }

  private tooDeep(): PayhookError {
    return new PayhookError(
      'malformed_payload',
      `The body nests objects and arrays deeper than ${this.maxDepth} levels.`,
    );
  }

  /**
   * Moves past the value at `i` if its text is already canonical (no whitespace, keys in order,
   * nothing to omit) and returns true, so the caller can take it verbatim; returns false as soon
   * as it is not, leaving `i` anywhere inside the value (read it again with {@link canonical}).
   * Throws on nesting deeper than the limit. `omitChecksum` asks to leave out a `checksum` key of
   * this object (the top level of `data`). Keys in strictly ascending order cannot repeat, so a
   * value this accepts has no duplicate keys.
   */
  verbatim(depth: number, omitChecksum: boolean): boolean {
    const u = this.u;
    let i = this.i;
    const c = u[i] as number;
    if (c === QUOTE) {
      this.i = stringEnd(u, i) & END;
      return true;
    }
    if (c !== OPEN_BRACE && c !== OPEN_BRACKET) {
      if (isWs(c)) return false;
      this.i = scalarEnd(u, i);
      return true;
    }
    if (depth >= this.maxDepth) throw this.tooDeep();
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
    let prevEscaped = false;
    for (;;) {
      if (object) {
        const keyStart = i;
        if (u[keyStart] !== QUOTE) return false; // whitespace
        const end = stringEnd(u, i);
        const escaped = end < 0;
        const keyEnd = end & END;
        if (omitChecksum && this.isKey(keyStart, keyEnd, escaped, 'checksum')) return false;
        if (prevStart !== -1) {
          // The first characters decide most comparisons.
          const d = escaped || prevEscaped ? 0 : firstDifference(u, prevStart, keyStart);
          if (d > 0) return false;
          if (d === 0 && this.compareKeys(prevStart, prevEnd, prevEscaped, keyStart, keyEnd, escaped) >= 0) {
            return false;
          }
        }
        prevStart = keyStart;
        prevEnd = keyEnd;
        prevEscaped = escaped;
        if (u[keyEnd] !== COLON) return false;
        i = keyEnd + 1;
      }
      const v = u[i] as number;
      if (v === QUOTE) i = stringEnd(u, i) & END;
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
   * with a local cursor.
   */
  private scan(depth: number, omitChecksum: boolean): number {
    const u = this.u;
    const tape = this.tape;
    const node = this.t;
    this.t += NODE;
    let i = this.i;
    const start = i;
    const c = u[i] as number;
    if (c !== OPEN_BRACE && c !== OPEN_BRACKET) {
      i = c === QUOTE ? stringEnd(u, i) & END : scalarEnd(u, i);
      tape[node] = KIND_TOKEN | VERBATIM;
      tape[node + 1] = start;
      tape[node + 2] = i;
      tape[node + 3] = this.t;
      this.i = i;
      return node;
    }
    if (depth >= this.maxDepth) throw this.tooDeep();
    const object = c === OPEN_BRACE;
    const close = object ? CLOSE_BRACE : CLOSE_BRACKET;
    let verbatim = true;
    let order = 0;
    let count = 0;
    i++;
    const base = this.sp;
    let sorted = true;
    let prev = -1;
    for (;;) {
      if (isWs(u[i] as number)) {
        verbatim = false;
        do i++;
        while (isWs(u[i] as number));
      }
      if (count === 0 && u[i] === close) {
        i++;
        break;
      }
      if (object) {
        const member = this.t;
        this.t += MEMBER;
        const keyStart = i;
        const end = stringEnd(u, i);
        const escaped = end < 0;
        i = end & END;
        let flags = escaped ? KEY_ESCAPED : 0;
        if (omitChecksum && this.isKey(keyStart, i, escaped, 'checksum')) {
          flags |= KEY_OMITTED;
          verbatim = false;
        }
        tape[member] = keyStart;
        tape[member + 1] = i;
        tape[member + 2] = flags;
        if (prev !== -1 && sorted) {
          // The first characters decide most comparisons.
          const prevStart = tape[prev] as number;
          let cmp =
            escaped || ((tape[prev + 2] as number) & KEY_ESCAPED) !== 0
              ? 0
              : firstDifference(u, prevStart, keyStart);
          if (cmp === 0) cmp = this.compareMembers(prev, member);
          if (cmp === 0) throw this.duplicateAt(member);
          if (cmp > 0) {
            sorted = false;
            verbatim = false;
          }
        }
        prev = member;
        this.stack[this.sp++] = member;
        while (isWs(u[i] as number)) {
          i++;
          verbatim = false;
        }
        i++; // ':'
        if (isWs(u[i] as number)) {
          verbatim = false;
          do i++;
          while (isWs(u[i] as number));
        }
      }
      const v = u[i] as number;
      if (v === OPEN_BRACE || v === OPEN_BRACKET) {
        this.i = i;
        if (((tape[this.scan(depth + 1, false)] as number) & VERBATIM) === 0) verbatim = false;
        i = this.i;
      } else {
        // A token, read here rather than through a call.
        const value = this.t;
        this.t += NODE;
        const valueStart = i;
        i = v === QUOTE ? stringEnd(u, i) & END : scalarEnd(u, i);
        tape[value] = KIND_TOKEN | VERBATIM;
        tape[value + 1] = valueStart;
        tape[value + 2] = i;
        tape[value + 3] = this.t;
      }
      count++;
      if (isWs(u[i] as number)) {
        verbatim = false;
        do i++;
        while (isWs(u[i] as number));
      }
      if (u[i++] === close) break;
    }
    if (object && !verbatim) {
      order = this.t;
      tape.set(this.stack.subarray(base, this.sp), order);
      this.t += count;
      if (!sorted) this.sortMembers(order, count);
    }
    this.sp = base;
    // A verbatim subtree is copied from the text: what the tape holds of it is not needed.
    if (verbatim) this.t = node + NODE;
    tape[node] = (object ? KIND_OBJECT : KIND_ARRAY) | (verbatim ? VERBATIM : 0);
    tape[node + 1] = start;
    tape[node + 2] = i;
    tape[node + 3] = this.t;
    tape[node + 4] = order;
    tape[node + 5] = count;
    this.i = i;
    return node;
  }

  /** Sorts `count` member indices at `order` in the tape by key; equal neighbours are duplicates. */
  private sortMembers(order: number, count: number): void {
    const tape = this.tape;
    if (count <= INSERTION_SORT_MAX) {
      for (let k = order + 1; k < order + count; k++) {
        const member = tape[k] as number;
        let j = k - 1;
        for (; j >= order; j--) {
          const cmp = this.compareMembers(tape[j] as number, member);
          if (cmp === 0) throw this.duplicateAt(member);
          if (cmp < 0) break;
          tape[j + 1] = tape[j] as number;
        }
        tape[j + 1] = member;
      }
      return;
    }
    const list = Array.from(tape.subarray(order, order + count));
    list.sort((a, b) => this.compareMembers(a, b));
    for (let k = 1; k < count; k++) {
      if (this.compareMembers(list[k - 1] as number, list[k] as number) === 0) {
        throw this.duplicateAt(list[k] as number);
      }
    }
    tape.set(list, order);
  }

  private duplicateAt(member: number): PayhookError {
    const tape = this.tape;
    return duplicateKey(
      this.key(
        tape[member] as number,
        tape[member + 1] as number,
        ((tape[member + 2] as number) & KEY_ESCAPED) !== 0,
      ),
    );
  }

  /** Writes the canonical text of the tape node `node` into `out` from `o`; returns the new length. */
  private emit(node: number, out: Uint16Array, o: number): number {
    const u = this.u;
    const tape = this.tape;
    const kind = tape[node] as number;
    if ((kind & VERBATIM) !== 0) {
      const end = tape[node + 2] as number;
      for (let k = tape[node + 1] as number; k < end; k++) out[o++] = u[k] as number;
      return o;
    }
    const count = tape[node + 5] as number;
    if ((kind & KIND_MASK) === KIND_ARRAY) {
      out[o++] = OPEN_BRACKET;
      let item = node + NODE;
      for (let k = 0; k < count; k++) {
        if (k > 0) out[o++] = COMMA;
        if (((tape[item] as number) & VERBATIM) !== 0) {
          const end = tape[item + 2] as number;
          for (let j = tape[item + 1] as number; j < end; j++) out[o++] = u[j] as number;
        } else {
          o = this.emit(item, out, o);
        }
        item = tape[item + 3] as number;
      }
      out[o++] = CLOSE_BRACKET;
      return o;
    }
    out[o++] = OPEN_BRACE;
    const order = tape[node + 4] as number;
    let first = true;
    for (let k = 0; k < count; k++) {
      const member = tape[order + k] as number;
      if (((tape[member + 2] as number) & KEY_OMITTED) !== 0) continue;
      if (!first) out[o++] = COMMA;
      first = false;
      const keyEnd = tape[member + 1] as number;
      for (let j = tape[member] as number; j < keyEnd; j++) out[o++] = u[j] as number;
      out[o++] = COLON;
      const value = member + MEMBER;
      if (((tape[value] as number) & VERBATIM) !== 0) {
        const end = tape[value + 2] as number;
        for (let j = tape[value + 1] as number; j < end; j++) out[o++] = u[j] as number;
      } else {
        o = this.emit(value, out, o);
      }
    }
    out[o++] = CLOSE_BRACE;
    return o;
  }

  /**
   * The canonical text of the value at `i` (no whitespace before it), read once into the tape;
   * leaves `i` after the value. Throws on duplicate keys and nesting deeper than the limit.
   */
  canonical(depth: number, omitChecksum: boolean): string {
    const node = this.read(depth, omitChecksum);
    const tape = this.tape;
    const start = tape[node + 1] as number;
    const end = tape[node + 2] as number;
    if (((tape[node] as number) & VERBATIM) !== 0) return this.s.slice(start, end);
    // The canonical text is never longer than the text it comes from.
    let out = sharedOut;
    if (out.length < end - start) {
      out = new Uint16Array(end - start);
      if (out.length <= SHARED_MAX) sharedOut = out;
    }
    return unitsToString(out, this.emit(node, out, 0));
  }

  /** Moves past the value at `i` (no whitespace before it), checking depth and duplicate keys. */
  validate(depth: number): void {
    this.read(depth, false);
  }

  /** Reads the value at `i` into a tape large enough for anything the rest of the text may hold. */
  private read(depth: number, omitChecksum: boolean): number {
    // Each node, member record and order entry stands for at least one character of text (a
    // token and its delimiter, a key and its colon): three ints per character is always enough.
    const room = 3 * (this.s.length - this.i) + NODE;
    this.tape = int32s(sharedTape, room);
    if (this.tape.length <= SHARED_MAX) sharedTape = this.tape;
    this.stack = int32s(sharedStack, Math.ceil((this.s.length - this.i) / 2) + 1);
    if (this.stack.length <= SHARED_MAX) sharedStack = this.stack;
    this.t = 0;
    this.sp = 0;
    return this.scan(depth, omitChecksum);
  }
}
