/**
 * What an HMAC keeps per key, so that a key's work is done once: its pads (hmac.ts), its pads'
 * hash states (hmac-js.ts) or its imported `CryptoKey` (hmac-web.ts). Text keys (business ids)
 * are kept in a map of at most 256, emptied when a new key finds it full; byte keys (a parsed
 * secret's bytes, made once by a receiver and never changed) for as long as those bytes live.
 */
export class KeyCache<V> {
  private readonly text = new Map<string, V>();
  private readonly bytes = new WeakMap<Uint8Array, V>();

  get(key: string | Uint8Array): V | undefined {
    return typeof key === 'string' ? this.text.get(key) : this.bytes.get(key);
  }

  set(key: string | Uint8Array, value: V): void {
    if (typeof key !== 'string') this.bytes.set(key, value);
    else {
      if (this.text.size >= 256 && !this.text.has(key)) this.text.clear();
      this.text.set(key, value);
    }
  }
}
