import { utf8Bytes } from './bytes.js';
import type { HmacKey } from './hmac.js';
import { requireSubtle, type WebCryptoKey } from './platform.js';

/*
 * HMAC-SHA256 on Web Crypto: the same keys and messages as hmac.ts, asynchronous. Verification
 * goes through `subtle.verify`, which compares in constant time; nothing here compares bytes in
 * JavaScript. Keys are imported once: text keys (business ids) in a map of at most 256, byte keys
 * for as long as their bytes live.
 */

const textKeys = new Map<string, Promise<WebCryptoKey>>();
const byteKeys = new WeakMap<Uint8Array, Promise<WebCryptoKey>>();

function importHmacKey(key: HmacKey): Promise<WebCryptoKey> {
  let k = typeof key === 'string' ? textKeys.get(key) : byteKeys.get(key);
  if (k !== undefined) return k;
  k = requireSubtle().importKey(
    'raw',
    typeof key === 'string' ? utf8Bytes(key) : key,
    { name: 'HMAC', hash: 'SHA-256' },
    false,
    ['sign', 'verify'],
  );
  if (typeof key === 'string') {
    if (textKeys.size >= 256) textKeys.clear();
    textKeys.set(key, k);
  } else {
    byteKeys.set(key, k);
  }
  return k;
}

/** HMAC-SHA256 of `message` under `key`, on Web Crypto. */
export async function hmacWeb(key: HmacKey, message: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await requireSubtle().sign('HMAC', await importHmacKey(key), message));
}

/**
 * Whether `signature` is the HMAC-SHA256 of `message` under `key`, compared in constant time by
 * Web Crypto. `message` is read after an await: it must not change until the promise settles
 * (bytes of the caller's own, never a view of a buffer shared between reads).
 */
export async function hmacVerifyWeb(
  key: HmacKey,
  message: Uint8Array,
  signature: Uint8Array,
): Promise<boolean> {
  const cryptoKey = await importHmacKey(key);
  return requireSubtle().verify('HMAC', cryptoKey, signature, message);
}
