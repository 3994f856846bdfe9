import {
  CLOSE_BRACE,
  CLOSE_BRACKET,
  COLON,
  COMMA,
  COPY_SLACK,
  copyUnits,
  OPEN_BRACE,
  OPEN_BRACKET,
  SHARED_MAX,
} from './lexical-tokens.js';

/*
 * The tape: what the scanner learns of a value, so that it is read once and written out in key
 * order without a second read. Every value is a node of NODE ints:
 *   [kind | VERBATIM?, start, end, next, order, count]
 * `start`/`end` bound its text, `next` is the tape index after its subtree. A node marked VERBATIM
 * (every token; a container with no whitespace, keys in order and nothing to leave out) is copied
 * from the text as it is, and its subtree is dropped from the tape. An array's `count` items
 * follow its node; an object's members follow as [keyStart, keyEnd, keyFlags, keyPrefix] then
 * the value's node, and `order` is where the tape lists its members' indices in canonical order.
 */
export const NODE = 6;
export const MEMBER = 4;
export const KIND_TOKEN = 1;
export const KIND_ARRAY = 2;
export const KIND_OBJECT = 3;
export const KIND_MASK = 3;
export const VERBATIM = 4;
export const KEY_ESCAPED = 1;
export const KEY_OMITTED = 2;

let sharedTape = new Int32Array(0);
let sharedOut = new Uint16Array(0);

/** A tape of at least `n` ints: the shared one, grown (and kept while at most SHARED_MAX). */
export function tapeFor(n: number): Int32Array {
  if (sharedTape.length >= n) return sharedTape;
  const tape = new Int32Array(n);
  if (n <= SHARED_MAX) sharedTape = tape;
  return tape;
}

/** An output buffer of at least `n` code units. */
export function outFor(n: number): Uint16Array {
  if (sharedOut.length >= n) return sharedOut;
  const out = new Uint16Array(n);
  if (n <= SHARED_MAX) sharedOut = out;
  return out;
}

/**
 * Writes the canonical text of the tape node `node` over the code units `u` into `out` from `o`;
 * returns the new length. `out` has {@link COPY_SLACK} units of room past the text (see
 * `copyUnits`).
 */
export function emit(u: Uint16Array, tape: Int32Array, node: number, out: Uint16Array, o: number): number {
  const kind = tape[node] as number;
  if ((kind & VERBATIM) !== 0)
    return copyUnits(u, tape[node + 1] as number, tape[node + 2] as number, out, o);
  const count = tape[node + 5] as number;
  if ((kind & KIND_MASK) === KIND_ARRAY) {
    out[o++] = OPEN_BRACKET;
    let item = node + NODE;
    for (let k = 0; k < count; k++) {
      if (k > 0) out[o++] = COMMA;
      o =
        ((tape[item] as number) & VERBATIM) !== 0
          ? copyUnits(u, tape[item + 1] as number, tape[item + 2] as number, out, o)
          : emit(u, tape, item, out, o);
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
    o = copyUnits(u, tape[member] as number, tape[member + 1] as number, out, o);
    out[o++] = COLON;
    const value = member + MEMBER;
    o =
      ((tape[value] as number) & VERBATIM) !== 0
        ? copyUnits(u, tape[value + 1] as number, tape[value + 2] as number, out, o)
        : emit(u, tape, value, out, o);
  }
  out[o++] = CLOSE_BRACE;
  return o;
}
