import { equalBytes, joinBytes, utf8Bytes } from './bytes.js';
import type { HmacKey } from './hmac.js';
import { hmacEqualsAnyJs, hmacEqualsJs, hmacJs } from './hmac-js.js';
import { KeyCache } from './hmac-keys.js';
import { requireSubtle, type WebCryptoKey } from './platform.js';

/*
 * HMAC-SHA256 on the Web path (where node:crypto is missing, or with `crypto: 'web'`): the same
 * keys and messages as hmac.ts. On Bun, every message is hashed by its native `CryptoHasher`, at
 * once. Elsewhere a message of up to JS_HMAC_MAX_BYTES is hashed in JavaScript, at once
 * (hmac-js.ts); a longer one by Web Crypto, whose `subtle.verify` compares in constant time.
 * Each `crypto.subtle` call is a promise (on Node, a trip through its thread pool), which costs
 * more than hashing a small message: docs/decisions.md, "Small bodies hashed in JavaScript on the
 * Web path". Keys are imported once: text keys (business ids) in a map of at most 256, byte keys
 * for as long as their bytes live.
 */

/**
 * The longest message hashed in JavaScript on the Web path; longer ones go to `crypto.subtle`.
 * Where the two cost the same CPU time on Node (Deno, also V8, crosses at about 16 KB; Workers and
 * browsers run V8). Bun's engine hashes at about 60% of V8's speed and crosses at about 3 KB, but
 * Bun takes the node:crypto path unless told otherwise: docs/decisions.md, "Small bodies hashed in
 * JavaScript on the Web path".
 */
export const JS_HMAC_MAX_BYTES = 12 * 1024;

/** A runtime's own synchronous HMAC, reached as a global (no import): Bun's `CryptoHasher`. */
type NativeHasher = new (
  algorithm: 'sha256',
  key: string | Uint8Array,
) => { update(data: string | Uint8Array): unknown; digest(): Uint8Array };

/**
 * Bun's native HMAC where the runtime is Bun, else undefined. There it hashes every message, at
 * once and at any length: its engine runs the JavaScript HMAC at about 60% of V8's speed, and a
 * native call costs less than either that or a `crypto.subtle` promise (docs/decisions.md, "Small
 * bodies hashed in JavaScript on the Web path").
 */
const NativeHmac = keyedHasher((globalThis as { Bun?: { CryptoHasher?: NativeHasher } }).Bun?.CryptoHasher);

/**
 * `hasher` if it computes HMAC-SHA256 with a key (RFC 4231's second test case), else undefined: a
 * Bun too old to take a key then hashes in JavaScript as other runtimes do, rather than wrongly.
 */
function keyedHasher(hasher: NativeHasher | undefined): NativeHasher | undefined {
  if (typeof hasher !== 'function') return undefined;
  try {
    const mac = new hasher('sha256', 'Jefe');
    mac.update('what do ya want for nothing?');
    const digest = mac.digest();
    let hex = '';
    for (const byte of digest) hex += byte.toString(16).padStart(2, '0');
    return hex === '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843' ? hasher : undefined;
  } catch {
    return undefined;
  }
}

/** HMAC-SHA256 of `head` + `tail` under `key`, by the runtime's own hasher. */
function nativeHmac(
  hasher: NativeHasher,
  key: HmacKey,
  head: string | Uint8Array,
  tail: string | Uint8Array,
) {
  const hmac = new hasher('sha256', key);
  if (head.length > 0) hmac.update(head);
  hmac.update(tail);
  return hmac.digest();
}

// A key's import while it runs, then the imported key itself (one await less per call after it).
type Imported = WebCryptoKey | Promise<WebCryptoKey>;
const imported = new KeyCache<Imported>();

function importHmacKey(key: HmacKey): Imported {
  const known = imported.get(key);
  if (known !== undefined) return known;
  const importing = requireSubtle()
    .importKey(
      'raw',
      typeof key === 'string' ? utf8Bytes(key) : key,
      { name: 'HMAC', hash: 'SHA-256' },
      false,
      ['sign', 'verify'],
    )
    .then((cryptoKey) => {
      imported.set(key, cryptoKey);
      return cryptoKey;
    });
  imported.set(key, importing);
  return importing;
}

/** HMAC-SHA256 of `message` under `key`, on the Web path. */
export async function hmacWeb(key: HmacKey, message: Uint8Array): Promise<Uint8Array> {
  if (NativeHmac !== undefined) return new Uint8Array(nativeHmac(NativeHmac, key, '', message));
  if (message.length <= JS_HMAC_MAX_BYTES) return hmacJs(key, message);
  return new Uint8Array(await requireSubtle().sign('HMAC', await importHmacKey(key), message));
}

/**
 * Whether `signature` is the HMAC-SHA256 of `message` under `key`, compared in constant time.
 * `message` is read after an await: it must not change until the promise settles (bytes of the
 * caller's own, never a view of a buffer shared between reads).
 */
export async function hmacVerifyWeb(
  key: HmacKey,
  message: Uint8Array,
  signature: Uint8Array,
): Promise<boolean> {
  if (NativeHmac !== undefined) return equalBytes(nativeHmac(NativeHmac, key, '', message), signature);
  if (message.length <= JS_HMAC_MAX_BYTES) return hmacEqualsJs(key, message, signature);
  const imported = importHmacKey(key);
  const cryptoKey = imported instanceof Promise ? await imported : imported;
  return requireSubtle().verify('HMAC', cryptoKey, signature, message);
}

/**
 * The index of the first key whose HMAC-SHA256 of `head` + `tail` is one of `expected`, or -1.
 * Every pair is compared, so the time taken says nothing about which one matched. At once (a
 * number) for a message hashed in JavaScript, the two parts hashed as one without being joined;
 * else a promise of it, the parts joined into bytes of its own before any await (`tail` may be a
 * view of a buffer its owner reuses).
 */
export function firstMatchWeb(
  keys: readonly HmacKey[],
  head: string,
  tail: string | Uint8Array,
  expected: readonly Uint8Array[],
): number | Promise<number> {
  if (NativeHmac !== undefined) {
    let found = -1;
    for (let k = 0; k < keys.length; k++) {
      const digest = nativeHmac(NativeHmac, keys[k] as HmacKey, head, tail);
      let any = false;
      for (let j = 0; j < expected.length; j++) any = equalBytes(digest, expected[j] as Uint8Array) || any;
      if (any && found < 0) found = k;
    }
    return found;
  }
  // About the message's bytes: the head is short, and a UTF-16 unit of a text tail 1 to 3 bytes.
  if (head.length + tail.length > JS_HMAC_MAX_BYTES) {
    const message = joinBytes(head, tail);
    if (keys.length === 1 && expected.length === 1) {
      return hmacVerifyWeb(keys[0] as HmacKey, message, expected[0] as Uint8Array).then((ok) =>
        ok ? 0 : -1,
      );
    }
    return Promise.all(
      keys.map((key) => Promise.all(expected.map((bytes) => hmacVerifyWeb(key, message, bytes)))),
    ).then((verdicts) => verdicts.findIndex((row) => row.includes(true)));
  }
  const headBytes = utf8Bytes(head);
  const tailBytes = typeof tail === 'string' ? utf8Bytes(tail) : tail;
  let found = -1;
  for (let k = 0; k < keys.length; k++) {
    if (hmacEqualsAnyJs(keys[k] as HmacKey, headBytes, tailBytes, expected) && found < 0) found = k;
  }
  return found;
}
