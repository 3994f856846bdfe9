import { allocBytes } from './bytes.js';
import { matchV1a, matchV1aAsync, type SigningPublicKey } from './ed25519.js';
import { type HmacKey, hmac, hmacInto } from './hmac.js';
import { firstMatchWeb } from './hmac-web.js';
import { type CryptoPath, type NodeCrypto, nodeCrypto, resolveCryptoPath } from './platform.js';
import { decodeListed, listed, SIGNATURE_BYTES } from './signature-wire.js';

/*
 * The one seam between core's two crypto paths. A verification flow (the checksum's in
 * checksum.ts, the signature's in webhook-signature.ts) is written once and asks a path three
 * questions; node:crypto answers them at once, the Web path (a JavaScript HMAC for a message up
 * to 12 KB, Web Crypto above and for Ed25519; Bun's native HMAC on Bun) at once or as a promise. What differs between the
 * paths stays behind this seam, how each compares included: node:crypto compares a `v1`
 * signature as base64 text, which costs less than decoding it.
 */

/** An index into the keys tried (-1 for none): at once, or a promise of it on the Web path. */
export type Match = number | Promise<number>;

/** What a verification flow asks of a crypto path. */
export interface DigestPath {
  /**
   * The index of the first key whose HMAC-SHA256 of `head` + `tail` is `expected` (32 bytes),
   * compared in constant time; or -1. `tail` may be a view its owner reuses after this returns.
   */
  matchDigest(keys: readonly HmacKey[], head: string, tail: string | Uint8Array, expected: Uint8Array): Match;
  /**
   * The index of the first key whose HMAC-SHA256 of `head` + `tail` is one of the `count` `v1`
   * signatures `listSignatures(header, 'v1')` has just found (read before this returns), or -1.
   * Every key is compared with every signature, so the time says nothing about which matched.
   */
  matchListed(
    keys: readonly { key: Uint8Array }[],
    head: string,
    tail: string | Uint8Array,
    header: string,
    count: number,
  ): Match;
  /**
   * The index of the first public key under which one of `signatures` (Ed25519) verifies
   * `content`, or -1. `content` must not change until a promise settles.
   */
  matchV1a(
    publicKeys: readonly SigningPublicKey[],
    signatures: readonly Uint8Array[],
    content: Uint8Array,
  ): Match;
}

// Undefined where node:crypto is missing: nodePath is never chosen there.
const timingSafeEqual = nodeCrypto?.timingSafeEqual as NodeCrypto['timingSafeEqual'];
// Two buffers to decode a pair of signatures into, kept between calls (node:crypto is synchronous).
const decodedListed = nodeCrypto ? (allocBytes(SIGNATURE_BYTES) as Buffer) : undefined;
const decodedExpected = nodeCrypto ? (allocBytes(SIGNATURE_BYTES) as Buffer) : undefined;

/**
 * Whether the base64 text at [from, to) of `header` decodes to the bytes `expected` (canonical
 * base64 of 32 bytes) stands for. Compared as text first, every character whatever the first
 * difference (as the Standard Webhooks libraries compare); a text that differs may still be the
 * same bytes spelled otherwise (unpadded, URL-safe), so it is then decoded and compared as bytes
 * in constant time.
 */
function base64Matches(header: string, from: number, to: number, expected: string): boolean {
  if (to - from === expected.length) {
    let difference = 0;
    for (let k = 0; k < expected.length; k++)
      difference |= expected.charCodeAt(k) ^ header.charCodeAt(from + k);
    if (difference === 0) return true;
  }
  const listedBytes = decodedListed as Buffer;
  const expectedBytes = decodedExpected as Buffer;
  if (listedBytes.write(header.slice(from, to), 'base64') !== SIGNATURE_BYTES) return false;
  expectedBytes.write(expected, 'base64');
  return timingSafeEqual(listedBytes, expectedBytes);
}

/** node:crypto: synchronous, every answer at once. */
export const nodePath: DigestPath = {
  matchDigest(keys, head, tail, expected) {
    for (let k = 0; k < keys.length; k++) {
      if (timingSafeEqual(hmacInto(keys[k] as HmacKey, head, tail), expected)) return k;
    }
    return -1;
  },
  matchListed(keys, head, tail, header, count) {
    let found = -1;
    for (let k = 0; k < keys.length; k++) {
      const expected = hmac((keys[k] as { key: Uint8Array }).key, head, tail, 'base64');
      for (let j = 0; j < count; j++) {
        const from = listed[2 * j] as number;
        if (base64Matches(header, from, listed[2 * j + 1] as number, expected) && found < 0) found = k;
      }
    }
    return found;
  },
  matchV1a,
};

/**
 * The Web path: a JavaScript HMAC up to 12 KB (at once), Web Crypto above and for Ed25519; on Bun,
 * Bun's native HMAC at any length (at once).
 */
export const webPath: DigestPath = {
  matchDigest: (keys, head, tail, expected) => firstMatchWeb(keys, head, tail, [expected]),
  matchListed: (keys, head, tail, header, count) =>
    firstMatchWeb(
      keys.map((k) => k.key),
      head,
      tail,
      decodeListed(header, count, SIGNATURE_BYTES),
    ),
  matchV1a: matchV1aAsync,
};

/**
 * The path a `crypto` option stands for on this runtime (`auto`: node:crypto where it is there);
 * a TypeError for `node` where node:crypto is missing, or for an unknown value.
 */
export const digestPath = (crypto: CryptoPath | undefined, option?: string): DigestPath =>
  resolveCryptoPath(crypto, option) === 'node' ? nodePath : webPath;
