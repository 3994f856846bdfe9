import { createHmac } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { hmacHex } from '../src/checksum.js';
import { hmac, hmacInto } from '../src/hmac.js';

/** What node:crypto's own Hmac gives for `key` and the message `head + tail`. */
function reference(key: string | Uint8Array, head: string, tail: string | Uint8Array | undefined): Buffer {
  const h = createHmac('sha256', typeof key === 'string' ? Buffer.from(key, 'utf8') : key).update(
    head,
    'utf8',
  );
  if (typeof tail === 'string') h.update(tail, 'utf8');
  else if (tail !== undefined) h.update(tail);
  return h.digest();
}

/** A message cut in two anywhere but inside a surrogate pair. */
function halves(message: string): [string, string] {
  let cut = Math.floor(message.length / 2);
  if (/[\ud800-\udbff]/.test(message.charAt(cut - 1)) && /[\udc00-\udfff]/.test(message.charAt(cut))) cut++;
  return [message.slice(0, cut), message.slice(cut)];
}

describe('hmac', () => {
  it('equals createHmac for any key and message, text or bytes, one call after another', () => {
    const key = fc.oneof(
      fc.string(),
      fc.string({ unit: 'binary', minLength: 60, maxLength: 200 }), // past a block: hashed first
      fc.uuid(),
      fc.uint8Array({ minLength: 0, maxLength: 100 }),
    );
    const message = fc.oneof(
      fc.string({ unit: 'binary' }),
      fc.string({ minLength: 3000, maxLength: 90_000 }),
    );
    fc.assert(
      fc.property(fc.array(fc.tuple(key, message, fc.boolean()), { minLength: 1, maxLength: 5 }), (calls) => {
        for (const [k, text, asBytes] of calls) {
          const expected = reference(k, text, undefined);
          expect(hmac(k, text, undefined, 'buffer').equals(expected)).toBe(true);
          const [head, rest] = halves(text);
          const tail = asBytes ? Buffer.from(rest, 'utf8') : rest;
          expect(hmac(k, head, tail, 'buffer').equals(expected)).toBe(true);
          expect(hmac(k, head, tail, 'hex')).toBe(expected.toString('hex'));
          expect(hmac(k, head, tail, 'base64')).toBe(expected.toString('base64'));
          expect(hmacInto(k, head, tail).equals(expected)).toBe(true);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('keeps the pads of each byte key apart, keys used in turn', () => {
    const key = Buffer.from('0123456789abcdef0123456789abcdef');
    const other = Buffer.from(key);
    other[0] = 0x78;
    expect(hmac(key, 'a', 'b', 'hex')).toBe(reference(key, 'a', 'b').toString('hex'));
    expect(hmac(other, 'a', 'b', 'hex')).toBe(reference(other, 'a', 'b').toString('hex'));
    expect(hmac(key, 'a', 'b', 'hex')).toBe(reference(key, 'a', 'b').toString('hex'));
  });
});

describe('hmacHex', () => {
  it('equals createHmac in lowercase hex', () => {
    fc.assert(
      fc.property(fc.string(), fc.string({ unit: 'binary' }), (key, message) => {
        expect(hmacHex(message, key)).toBe(createHmac('sha256', key).update(message, 'utf8').digest('hex'));
      }),
    );
  });
});

describe('hmac of a message larger than the shared buffer', () => {
  it('equals createHmac, text or bytes, and leaves the shared buffer right for the next call', () => {
    const big = 'é'.repeat(200_000); // 400,000 bytes of UTF-8: past the 256 KiB kept buffer
    const key = 'b2a4c6d8-0000-4000-8000-000000000001';
    const expected = reference(key, big, undefined);
    expect(hmac(key, big, undefined, 'buffer').equals(expected)).toBe(true);
    expect(hmac(key, '', Buffer.from(big, 'utf8'), 'buffer').equals(expected)).toBe(true);
    expect(hmacInto(key, 'é'.repeat(100_000), 'é'.repeat(100_000)).equals(expected)).toBe(true);
    expect(hmac(key, 'small', undefined, 'buffer').equals(reference(key, 'small', undefined))).toBe(true);
    expect(hmac('other', 'small', undefined, 'buffer').equals(reference('other', 'small', undefined))).toBe(
      true,
    );
  });
});
