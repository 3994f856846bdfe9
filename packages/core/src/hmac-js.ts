import { utf8Bytes } from './bytes.js';
import type { HmacKey } from './hmac.js';
import { KeyCache } from './hmac-keys.js';
import { sha256Block } from './sha256.js';

/*
 * HMAC-SHA256 (RFC 2104) in JavaScript, synchronous: the Web path's HMAC for small messages, where
 * a `crypto.subtle` call (a promise, and on Node a trip through its thread pool) costs more than
 * hashing the message here (hmac-web.ts chooses; docs/decisions.md, "Small bodies hashed in
 * JavaScript on the Web path"). Each key's inner and outer pads are hashed once and their states
 * kept, as hmac.ts keeps its pads: text keys (business ids) in a map of at most 256, byte keys for
 * as long as their bytes live. Comparisons take the same time whatever the bytes compared.
 */

const BLOCK = 64;

// The initial hash value (FIPS 180-4, 5.3.3), as signed 32-bit words.
const IV = new Int32Array([
  0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
]);

/** The hash states after a key's inner (ipad) and outer (opad) block. */
interface PadStates {
  inner: Int32Array;
  outer: Int32Array;
}

const padStates = new KeyCache<PadStates>();

// Shared by every call (hashing is synchronous): the hash state, the last one or two blocks with
// the padding, and the inner digest.
const state = new Int32Array(8);
const last = new Uint8Array(2 * BLOCK);
const lastView = new DataView(last.buffer);
const innerDigest = new Uint8Array(32);

const EMPTY = new Uint8Array(0);

/**
 * Hashes `head` then `message` into `state`, which holds the state after `before` bytes (whole
 * blocks) were hashed, and ends it with SHA-256's padding: a 1 bit, zeros, and the length in bits.
 * The two parts are hashed as one without being joined first; `head` is shorter than a block.
 */
function finish(head: Uint8Array, message: Uint8Array, before: number): void {
  const n = message.length;
  let rest = head.length;
  for (let k = 0; k < rest; k++) last[k] = head[k] as number;
  // The first block is the head and as much of the message as fits; the rest of the message's
  // whole blocks are read where they are.
  const from = rest === 0 ? 0 : Math.min(BLOCK - rest, n);
  for (let k = 0; k < from; k++) last[rest++] = message[k] as number;
  if (rest === BLOCK) {
    sha256Block(state, lastView, 0);
    rest = 0;
  }
  const whole = n - ((n - from) % BLOCK);
  if (whole > from) {
    const view = new DataView(message.buffer, message.byteOffset, n);
    for (let at = from; at < whole; at += BLOCK) sha256Block(state, view, at);
  }
  for (let k = whole; k < n; k++) last[rest++] = message[k] as number;
  last[rest] = 0x80;
  const end = rest + 9 <= BLOCK ? BLOCK : 2 * BLOCK;
  last.fill(0, rest + 1, end - 8);
  const bits = (before + head.length + n) * 8;
  lastView.setUint32(end - 8, Math.floor(bits / 0x100000000));
  lastView.setUint32(end - 4, bits >>> 0);
  sha256Block(state, lastView, 0);
  if (end > BLOCK) sha256Block(state, lastView, BLOCK);
}

/** Writes `state` as the 32 bytes of a digest into `into`. */
function digestInto(into: Uint8Array): Uint8Array {
  for (let i = 0; i < 8; i++) {
    const word = state[i] as number;
    into[4 * i] = word >>> 24;
    into[4 * i + 1] = word >>> 16;
    into[4 * i + 2] = word >>> 8;
    into[4 * i + 3] = word;
  }
  return into;
}

/** The SHA-256 digest of `message` (a new array). */
export function sha256Js(message: Uint8Array): Uint8Array {
  state.set(IV);
  finish(EMPTY, message, 0);
  return digestInto(new Uint8Array(32));
}

/** The state after one block of `key` XOR `pad` (the key zero-padded to a block). */
function padState(key: Uint8Array, pad: number): Int32Array {
  const block = new Uint8Array(BLOCK).fill(pad);
  for (let k = 0; k < key.length; k++) block[k] = (key[k] as number) ^ pad;
  const padded = new Int32Array(IV);
  sha256Block(padded, new DataView(block.buffer), 0);
  return padded;
}

function padsOf(key: HmacKey): PadStates {
  let pads = padStates.get(key);
  if (pads !== undefined) return pads;
  let bytes = typeof key === 'string' ? utf8Bytes(key) : key;
  if (bytes.length > BLOCK) bytes = sha256Js(bytes);
  pads = { inner: padState(bytes, 0x36), outer: padState(bytes, 0x5c) };
  padStates.set(key, pads);
  return pads;
}

/** HMAC-SHA256 of `head` + `message` under `key`, left in `state`; `head` is shorter than a block. */
function hmacState(key: HmacKey, head: Uint8Array, message: Uint8Array): void {
  const { inner, outer } = padsOf(key);
  state.set(inner);
  finish(head, message, BLOCK);
  digestInto(innerDigest);
  state.set(outer);
  finish(EMPTY, innerDigest, BLOCK);
}

/** HMAC-SHA256 of `message` under `key` (a new array of 32 bytes). */
export function hmacJs(key: HmacKey, message: Uint8Array): Uint8Array {
  hmacState(key, EMPTY, message);
  return digestInto(new Uint8Array(32));
}

/** Whether the digest in `state` is `expected`: every word compared, whatever the first difference. */
function stateEquals(expected: Uint8Array): boolean {
  if (expected.length !== 32) return false;
  let difference = 0;
  for (let i = 0; i < 8; i++) {
    const word =
      ((expected[4 * i] as number) << 24) |
      ((expected[4 * i + 1] as number) << 16) |
      ((expected[4 * i + 2] as number) << 8) |
      (expected[4 * i + 3] as number);
    difference |= (state[i] as number) ^ word;
  }
  return difference === 0;
}

/**
 * Whether `expected` is the HMAC-SHA256 of `message` under `key`. The 32 bytes are compared as
 * words, every word whatever the first difference, so the time taken says nothing about where
 * they differ; an `expected` of another length is false at once (lengths are not secret).
 */
export function hmacEqualsJs(key: HmacKey, message: Uint8Array, expected: Uint8Array): boolean {
  hmacState(key, EMPTY, message);
  return stateEquals(expected);
}

/**
 * Whether the HMAC-SHA256 of `head` + `message` under `key` is any of `expected`: hashed once, the
 * two parts as one without being joined, compared with each as {@link hmacEqualsJs} compares, every
 * one of them whatever the verdicts. A head of a block or more is joined to the message first.
 */
export function hmacEqualsAnyJs(
  key: HmacKey,
  head: Uint8Array,
  message: Uint8Array,
  expected: readonly Uint8Array[],
): boolean {
  if (head.length < BLOCK) hmacState(key, head, message);
  else {
    const joined = new Uint8Array(head.length + message.length);
    joined.set(head);
    joined.set(message, head.length);
    hmacState(key, EMPTY, joined);
  }
  let any = false;
  for (let j = 0; j < expected.length; j++) any = stateEquals(expected[j] as Uint8Array) || any;
  return any;
}
