import { PayhookError } from './errors.js';

/** Options of {@link lexicalCanonicalJson}. */
export interface LexicalOptions {
  /** Deepest nesting of objects and arrays accepted (default 64). */
  maxDepth?: number;
}

export const DEFAULT_MAX_DEPTH = 64;

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
 * nesting deeper than `maxDepth`.
 *
 * @example
 * ```ts
 * lexicalCanonicalJson('{ "b": 1.0, "a": "\\/path" }'); // '{"a":"\\/path","b":1.0}'
 * ```
 */
export function lexicalCanonicalJson(raw: string | Uint8Array, options: LexicalOptions = {}): string {
  const text = decodeUtf8(raw);
  parseJson(text);
  const scanner = new Scanner(text, options.maxDepth ?? DEFAULT_MAX_DEPTH);
  const start = scanner.skipWs();
  const clean = scanner.check(0, false);
  return clean
    ? text.slice(start, scanner.i)
    : new Scanner(text, Number.POSITIVE_INFINITY, start).build(false);
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
 */
export function lexicalEnvelope(text: string, maxDepth: number = DEFAULT_MAX_DEPTH): LexicalEnvelope {
  const scanner = new Scanner(text, maxDepth);
  scanner.skipWs();
  if (text.charCodeAt(scanner.i) !== OPEN_BRACE) return { data: undefined };
  scanner.i++;
  let data: string | undefined;
  const keys: string[] = [];
  scanner.skipWs();
  if (text.charCodeAt(scanner.i) === CLOSE_BRACE) return { data: undefined };
  for (;;) {
    scanner.skipWs();
    const key = scanner.readKey();
    keys.push(key);
    scanner.skipWs();
    scanner.i++; // ':'
    scanner.skipWs();
    if (key === 'data') {
      const start = scanner.i;
      const clean = scanner.check(1, true);
      data = clean
        ? text.slice(start, scanner.i)
        : new Scanner(text, Number.POSITIVE_INFINITY, start).build(true);
    } else {
      scanner.check(1, false);
    }
    scanner.skipWs();
    if (text.charCodeAt(scanner.i++) === CLOSE_BRACE) break;
  }
  assertUnique(keys);
  return { data };
}

const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;

function isWs(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
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

/**
 * A cursor over JSON text that `JSON.parse` has already validated, so it only has to find
 * structure: it never re-validates tokens, which keeps the verify path close to one `JSON.parse`.
 */
class Scanner {
  i: number;
  /** Index of the next backslash at or after `i`, or -1: lets string skipping use `indexOf`. */
  private nextBackslash = -2;

  constructor(
    readonly s: string,
    readonly maxDepth: number,
    start = 0,
  ) {
    this.i = start;
  }

  /** Skips whitespace; returns the new position. */
  skipWs(): number {
    const s = this.s;
    let i = this.i;
    for (;;) {
      const c = s.charCodeAt(i);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
      else break;
    }
    this.i = i;
    return i;
  }

  /** Moves past the string token at `i` (an opening quote); returns whether it held a backslash. */
  private skipString(): boolean {
    const s = this.s;
    const start = this.i;
    if (this.nextBackslash !== -1 && this.nextBackslash < start) this.nextBackslash = s.indexOf('\\', start);
    let end = s.indexOf('"', start + 1);
    const escaped = this.nextBackslash !== -1 && this.nextBackslash < end;
    if (escaped) {
      // A quote preceded by an odd run of backslashes is part of the string.
      for (;;) {
        let run = 0;
        while (s.charCodeAt(end - 1 - run) === BACKSLASH) run++;
        if ((run & 1) === 0) break;
        end = s.indexOf('"', end + 1);
      }
      this.nextBackslash = s.indexOf('\\', end + 1);
    }
    this.i = end + 1;
    return escaped;
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
    const s = this.s;
    const aLen = aEnd - aStart - 2;
    const bLen = bEnd - bStart - 2;
    const n = Math.min(aLen, bLen);
    for (let k = 1; k <= n; k++) {
      const d = s.charCodeAt(aStart + k) - s.charCodeAt(bStart + k);
      if (d !== 0) return d;
    }
    return aLen - bLen;
  }

  private tooDeep(): PayhookError {
    return new PayhookError(
      'malformed_payload',
      `The body nests objects and arrays deeper than ${this.maxDepth} levels.`,
    );
  }

  /**
   * Moves past the value at `i`. Returns true when its text is already canonical (no whitespace,
   * keys in order, nothing to omit), so the caller can take it verbatim. Throws on duplicate keys
   * and on nesting deeper than the limit. `omitChecksum` asks to leave out a `checksum` key of this
   * object (the top level of `data`).
   */
  check(depth: number, omitChecksum: boolean): boolean {
    const s = this.s;
    const c = s.charCodeAt(this.i);
    if (c === QUOTE) {
      this.skipString();
      return true;
    }
    if (c === OPEN_BRACE) {
      if (depth >= this.maxDepth) throw this.tooDeep();
      this.i++;
      let clean = true;
      const afterOpen = this.i;
      if (this.skipWs() !== afterOpen) clean = false;
      if (s.charCodeAt(this.i) === CLOSE_BRACE) {
        this.i++;
        return clean;
      }
      // Keys in strictly ascending order cannot repeat; only an unsorted object needs the full
      // check. Keys are compared in place (no string is made) unless one of them has an escape.
      // Key token bounds [start, end, escaped] for the duplicate check, should the keys be unsorted.
      const bounds: number[] = [];
      let sorted = true;
      let prevStart = -1;
      let prevEnd = -1;
      let prevEscaped = false;
      for (;;) {
        if (isWs(s.charCodeAt(this.i))) {
          this.skipWs();
          clean = false;
        }
        const keyStart = this.i;
        const escaped = this.skipString();
        const keyEnd = this.i;
        if (omitChecksum && this.isKey(keyStart, keyEnd, escaped, 'checksum')) clean = false;
        if (sorted && prevStart !== -1) {
          const order = this.compareKeys(prevStart, prevEnd, prevEscaped, keyStart, keyEnd, escaped);
          if (order === 0) throw duplicateKey(this.key(keyStart, keyEnd, escaped));
          if (order > 0) {
            sorted = false;
            clean = false;
          }
        }
        prevStart = keyStart;
        prevEnd = keyEnd;
        prevEscaped = escaped;
        bounds.push(keyStart, keyEnd, escaped ? 1 : 0);
        if (isWs(s.charCodeAt(this.i))) {
          this.skipWs();
          clean = false;
        }
        this.i++; // ':'
        if (isWs(s.charCodeAt(this.i))) {
          this.skipWs();
          clean = false;
        }
        if (!this.check(depth + 1, false)) clean = false;
        if (isWs(s.charCodeAt(this.i))) {
          this.skipWs();
          clean = false;
        }
        if (s.charCodeAt(this.i++) === CLOSE_BRACE) break;
      }
      if (!sorted) {
        const keys: string[] = [];
        for (let k = 0; k < bounds.length; k += 3) {
          keys.push(this.key(bounds[k] as number, bounds[k + 1] as number, bounds[k + 2] === 1));
        }
        assertUnique(keys);
      }
      return clean;
    }
    if (c === OPEN_BRACKET) {
      if (depth >= this.maxDepth) throw this.tooDeep();
      this.i++;
      let clean = true;
      let p = this.i;
      if (this.skipWs() !== p) clean = false;
      if (s.charCodeAt(this.i) === CLOSE_BRACKET) {
        this.i++;
        return clean;
      }
      for (;;) {
        p = this.i;
        if (this.skipWs() !== p) clean = false;
        if (!this.check(depth + 1, false)) clean = false;
        p = this.i;
        if (this.skipWs() !== p) clean = false;
        if (s.charCodeAt(this.i++) === CLOSE_BRACKET) break;
      }
      return clean;
    }
    // A number or a literal: everything up to the next delimiter (NaN past the end stops it too).
    let i = this.i + 1;
    for (;;) {
      const d = s.charCodeAt(i);
      if (d === COMMA || d === CLOSE_BRACE || d === CLOSE_BRACKET || d <= 0x20 || Number.isNaN(d)) break;
      i++;
    }
    this.i = i;
    return true;
  }

  /** Builds the canonical text of the value at `i` (called only for values `check` found unclean). */
  build(omitChecksum: boolean): string {
    const s = this.s;
    this.skipWs();
    const c = s.charCodeAt(this.i);
    if (c === OPEN_BRACE) {
      this.i++;
      this.skipWs();
      if (s.charCodeAt(this.i) === CLOSE_BRACE) {
        this.i++;
        return '{}';
      }
      const members: [key: string, text: string][] = [];
      for (;;) {
        this.skipWs();
        const keyStart = this.i;
        const key = this.readKey();
        const keyText = s.slice(keyStart, this.i);
        this.skipWs();
        this.i++; // ':'
        const value = this.build(false);
        if (!(omitChecksum && key === 'checksum')) members.push([key, `${keyText}:${value}`]);
        this.skipWs();
        if (s.charCodeAt(this.i++) === CLOSE_BRACE) break;
      }
      members.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
      let out = '{';
      for (let k = 0; k < members.length; k++) {
        if (k > 0) out += ',';
        out += (members[k] as [string, string])[1];
      }
      return `${out}}`;
    }
    if (c === OPEN_BRACKET) {
      this.i++;
      this.skipWs();
      if (s.charCodeAt(this.i) === CLOSE_BRACKET) {
        this.i++;
        return '[]';
      }
      let out = '[';
      for (let first = true; ; first = false) {
        if (!first) out += ',';
        out += this.build(false);
        this.skipWs();
        if (s.charCodeAt(this.i++) === CLOSE_BRACKET) break;
      }
      return `${out}]`;
    }
    const start = this.i;
    if (c === QUOTE) this.skipString();
    else this.check(0, false);
    return s.slice(start, this.i);
  }
}
