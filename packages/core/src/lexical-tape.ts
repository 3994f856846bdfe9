import { allocBytes, allocBytesUnsafe } from './bytes.js';
import {
  CLOSE_BRACE,
  CLOSE_BRACKET,
  COLON,
  COMMA,
  COPY_SLACK,
  copyBytes,
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
 * A key flagged KEY_DECODED (a backslash or a byte past ASCII in it) is compared by its decoded
 * value; KEY_OMITTED is the `checksum` key `data` is signed without.
 */
export const NODE = 6;
export const MEMBER = 4;
export const KIND_TOKEN = 1;
export const KIND_ARRAY = 2;
export const KIND_OBJECT = 3;
export const KIND_MASK = 3;
export const VERBATIM = 4;
export const KEY_DECODED = 1;
export const KEY_OMITTED = 2;

/** How many reads have begun: a view a read returned is good while this has not moved. */
let readCount = 0;

/** Notes that a read begins: it writes over the shared buffers (`bytesOf`, {@link outFor}). */
export function beginRead(): void {
  readCount++;
}

/** The number of reads begun so far: a view of the shared buffers is good while this stays. */
export function readsBegun(): number {
  return readCount;
}

let sharedTape = new Int32Array(0);
/** Bytes to write canonical text into, and a view of them for `copyBytes`. */
export interface Output {
  bytes: Uint8Array;
  view: DataView;
}

const outputOf = (bytes: Uint8Array): Output => ({
  bytes,
  view: new DataView(bytes.buffer, bytes.byteOffset, bytes.length),
});

let sharedOut = outputOf(allocBytes(0));

/** A tape of at least `n` ints: the shared one, grown (and kept while at most SHARED_MAX). */
export function tapeFor(n: number): Int32Array {
  if (sharedTape.length >= n) return sharedTape;
  const tape = new Int32Array(n);
  if (n <= SHARED_MAX) sharedTape = tape;
  return tape;
}

/** An output buffer of at least `n` bytes. */
export function outFor(n: number): Output {
  if (sharedOut.bytes.length >= n) return sharedOut;
  const out = outputOf(allocBytesUnsafe(n));
  if (n <= SHARED_MAX) sharedOut = out;
  return out;
}

/**
 * Writes the canonical text of the tape node `node` over the text seen through `u` into the bytes
 * seen through `out`, from `o`; returns the new length. `out` has {@link COPY_SLACK} bytes of
 * room past the text (see `copyBytes`).
 */
export function emit(u: DataView, tape: Int32Array, node: number, out: DataView, o: number): number {
  const kind = tape[node] as number;
  if ((kind & VERBATIM) !== 0)
    return copyBytes(u, tape[node + 1] as number, tape[node + 2] as number, out, o);
  const count = tape[node + 5] as number;
  if ((kind & KIND_MASK) === KIND_ARRAY) {
    out.setUint8(o++, OPEN_BRACKET);
    let item = node + NODE;
    for (let k = 0; k < count; k++) {
      if (k > 0) out.setUint8(o++, COMMA);
      o =
        ((tape[item] as number) & VERBATIM) !== 0
          ? copyBytes(u, tape[item + 1] as number, tape[item + 2] as number, out, o)
          : emit(u, tape, item, out, o);
      item = tape[item + 3] as number;
    }
    out.setUint8(o++, CLOSE_BRACKET);
    return o;
  }
  out.setUint8(o++, OPEN_BRACE);
  const order = tape[node + 4] as number;
  let first = true;
  for (let k = 0; k < count; k++) {
    const member = tape[order + k] as number;
    if (((tape[member + 2] as number) & KEY_OMITTED) !== 0) continue;
    if (!first) out.setUint8(o++, COMMA);
    first = false;
    o = copyBytes(u, tape[member] as number, tape[member + 1] as number, out, o);
    out.setUint8(o++, COLON);
    const value = member + MEMBER;
    o =
      ((tape[value] as number) & VERBATIM) !== 0
        ? copyBytes(u, tape[value + 1] as number, tape[value + 2] as number, out, o)
        : emit(u, tape, value, out, o);
  }
  out.setUint8(o++, CLOSE_BRACE);
  return o;
}
