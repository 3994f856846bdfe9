import { KeyCache } from './hmac-keys.js';
import { NodeBuffer, type NodeCrypto, nodeCrypto, requireNodeCrypto } from './platform.js';

/*
 * HMAC-SHA256 as RFC 2104 spells it out, with two one-shot SHA-256 digests (`crypto.hash`) over
 * pads prepared once per key: creating a Node `Hmac` (an OpenSSL context and a stream object per
 * call) cost more than hashing a 1 KB event. The one HMAC of the package: the checksum (keyed by
 * a business id) and the Standard Webhooks signature (keyed by a secret's bytes) both go through
 * here. The message is given in two parts, `head` and `tail`, hashed as one without being joined
 * first: `event|` and the canonical data, or `id.timestamp.` and the body.
 */

// node:crypto's functions and Buffer, where the runtime has them (see platform.ts). Elsewhere they
// are undefined and every call below throws a TypeError that names the async (Web Crypto) variant,
// before any of them is reached; hmac-web.ts is the HMAC there.
const hash = nodeCrypto?.hash as NodeCrypto['hash'];
const createHash = nodeCrypto?.createHash as NodeCrypto['createHash'];
const Buf = NodeBuffer as typeof Buffer;

/** A key: text (its UTF-8 bytes are the key) or bytes. */
export type HmacKey = string | Uint8Array;

/** The second part of a message: text (hashed as UTF-8) or bytes. */
export type HmacTail = string | Uint8Array | undefined;

/** The HMAC-SHA256 pads of one key: its bytes, zero-padded to a block, XOR 0x36 and 0x5c. */
interface Pads {
  inner: Buffer;
  /** The outer pad, followed by room for the inner digest. */
  outer: Buffer;
}

const BLOCK = 64;

// Pads are prepared once per key.
const pads = new KeyCache<Pads>();

function padsOf(key: HmacKey): Pads {
  let p = pads.get(key);
  if (p !== undefined) return p;
  let bytes: Uint8Array = typeof key === 'string' ? Buf.from(key, 'utf8') : key;
  if (bytes.length > BLOCK) bytes = createHash('sha256').update(bytes).digest();
  const inner = Buf.alloc(BLOCK, 0x36);
  const outer = Buf.alloc(BLOCK + 32, 0x5c);
  for (let k = 0; k < bytes.length; k++) {
    inner[k] = (bytes[k] as number) ^ 0x36;
    outer[k] = (bytes[k] as number) ^ 0x5c;
  }
  p = { inner, outer };
  pads.set(key, p);
  return p;
}

/** The largest scratch buffer kept between calls (the inner pad and up to 3 bytes per code unit). */
const SCRATCH_MAX = 256 * 1024;

// The inner pad, then the message: shared by every call (hashing is synchronous).
let scratch = NodeBuffer ? Buf.alloc(0) : (undefined as unknown as Buffer);
let scratchPad: Buffer | undefined;

/** The bytes `part` may take as UTF-8 (a UTF-16 code unit takes at most 3). */
const roomOf = (part: HmacTail): number =>
  part === undefined ? 0 : typeof part === 'string' ? part.length * 3 : part.length;

/** Writes `part` into the scratch buffer at `at`; returns the index after it. */
function put(part: HmacTail, at: number): number {
  if (part === undefined) return at;
  if (typeof part === 'string') return at + scratch.write(part, at, 'utf8');
  scratch.set(part, at);
  return at + part.length;
}

/**
 * The inner digest, as a 32-character latin1 (`binary`) string rather than a Buffer: each digest
 * Buffer is a native allocation of its own, which cost more than the copy.
 *
 * A message too large for the kept scratch buffer is streamed through a `Hash` instead: a fresh
 * buffer of that size per call (fresh pages for the kernel to map and zero, external memory for
 * the GC to account) cost three times the hashing itself at 100 KB.
 */
function innerDigest(inner: Buffer, head: string, tail: HmacTail): string {
  const room = BLOCK + head.length * 3 + roomOf(tail);
  if (room > SCRATCH_MAX) {
    const stream = createHash('sha256').update(inner).update(head, 'utf8');
    if (typeof tail === 'string') stream.update(tail, 'utf8');
    else if (tail !== undefined) stream.update(tail);
    return stream.digest('binary');
  }
  if (scratch.length < room) {
    scratch = Buf.allocUnsafe(Math.min(SCRATCH_MAX, Math.max(room, 4096, scratch.length * 2)));
    scratchPad = undefined;
  }
  if (scratchPad !== inner) {
    scratch.set(inner, 0);
    scratchPad = inner;
  }
  const length = put(tail, put(head, BLOCK));
  return hash('sha256', new Uint8Array(scratch.buffer, scratch.byteOffset, length), 'binary');
}

/** The outer pad of `key` with the inner digest of `head` + `tail` after it: what the HMAC hashes last. */
function outerBlock(key: HmacKey, head: string, tail: HmacTail): Buffer {
  if (nodeCrypto === undefined) requireNodeCrypto('HMAC');
  const { inner, outer } = padsOf(key);
  // `binary` is latin1: one character per byte, written back as that byte.
  outer.write(innerDigest(inner, head, tail), BLOCK, 32, 'latin1');
  return outer;
}

/**
 * HMAC-SHA256 of `head` + `tail` under `key`, encoded as `crypto.hash` encodes it (`buffer`: a new
 * Buffer of the 32 bytes).
 *
 * @example
 * ```ts
 * hmac('5b1e1f0a-…', 'payment.session.succeeded|', '{"amount":100}', 'hex'); // the checksum
 * ```
 */
export function hmac(key: HmacKey, head: string, tail: HmacTail, encoding: 'hex' | 'base64'): string;
export function hmac(key: HmacKey, head: string, tail: HmacTail, encoding: 'buffer'): Buffer;
export function hmac(
  key: HmacKey,
  head: string,
  tail: HmacTail,
  encoding: 'buffer' | 'hex' | 'base64',
): string | Buffer {
  const outer = outerBlock(key, head, tail);
  return encoding === 'buffer' ? hash('sha256', outer, 'buffer') : hash('sha256', outer, encoding);
}

// The last digest of hmacInto, written from its latin1 string.
const digest = NodeBuffer ? Buf.alloc(32) : (undefined as unknown as Buffer);

/**
 * HMAC-SHA256 of `head` + `tail` under `key`, written into a buffer shared by every call: read it
 * (compare it) before the next call. A verifier's path, which needs the bytes only for a moment.
 */
export function hmacInto(key: HmacKey, head: string, tail: HmacTail): Buffer {
  const outer = outerBlock(key, head, tail);
  digest.write(hash('sha256', outer, 'binary'), 0, 32, 'latin1');
  return digest;
}
