import { createHash, createHmac } from 'node:crypto';
import {
  encodeSignedEvent,
  generateSigningSecret,
  parseSigningSecret,
  readSignatureHeaders,
  signWebhook,
  verifyChecksum,
  verifyChecksumAsync,
  verifyWebhookSignature,
  verifyWebhookSignatureAsync,
} from '@payhook/core';
import { createTestPayment } from '@payhook/core/testing';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { hmacEqualsAnyJs, hmacEqualsJs, hmacJs, sha256Js } from '../src/hmac-js.js';
import { firstMatchWeb, hmacVerifyWeb, hmacWeb, JS_HMAC_MAX_BYTES } from '../src/hmac-web.js';

// The JavaScript HMAC of the Web path (small messages) against RFC 4231's vectors and node:crypto,
// and the Web path's choice between it and Web Crypto on either side of the threshold.

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');
const fromHex = (text: string) => new Uint8Array(Buffer.from(text, 'hex'));
const ascii = (text: string) => new Uint8Array(Buffer.from(text, 'latin1'));

/** RFC 4231, section 4: key, data, HMAC-SHA-256 (case 5's is truncated to 128 bits). */
const RFC4231: [string, Uint8Array, Uint8Array, string][] = [
  [
    'case 1',
    fromHex('0b'.repeat(20)),
    ascii('Hi There'),
    'b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7',
  ],
  [
    'case 2',
    ascii('Jefe'),
    ascii('what do ya want for nothing?'),
    '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843',
  ],
  [
    'case 3',
    fromHex('aa'.repeat(20)),
    fromHex('dd'.repeat(50)),
    '773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe',
  ],
  [
    'case 4',
    fromHex('0102030405060708090a0b0c0d0e0f10111213141516171819'),
    fromHex('cd'.repeat(50)),
    '82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b',
  ],
  ['case 5', fromHex('0c'.repeat(20)), ascii('Test With Truncation'), 'a3b6167473100ee06e0c796c2955552b'],
  [
    'case 6',
    fromHex('aa'.repeat(131)),
    ascii('Test Using Larger Than Block-Size Key - Hash Key First'),
    '60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54',
  ],
  [
    'case 7',
    fromHex('aa'.repeat(131)),
    ascii(
      'This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm.',
    ),
    '9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2',
  ],
];

describe('hmacJs', () => {
  it.each(RFC4231)('gives RFC 4231 %s', (_, key, data, mac) => {
    expect(hex(hmacJs(key, data)).slice(0, mac.length)).toBe(mac);
    expect(hex(hmacJs(key, data))).toBe(createHmac('sha256', key).update(data).digest('hex'));
  });

  it('hashes the FIPS 180-2 examples, around the padding boundaries too', () => {
    expect(hex(sha256Js(ascii('abc')))).toBe(
      'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    );
    expect(hex(sha256Js(new Uint8Array(0)))).toBe(
      'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    );
    expect(hex(sha256Js(ascii('abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq')))).toBe(
      '248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1',
    );
    for (let n = 0; n <= 200; n++) {
      const message = new Uint8Array(n).map((_, k) => (k * 31 + n) & 0xff);
      expect(hex(sha256Js(message)), `${n} bytes`).toBe(createHash('sha256').update(message).digest('hex'));
    }
  });

  it('equals node:crypto for any key, text or bytes, and any message, one call after another', () => {
    const key = fc.oneof(
      fc.string(),
      fc.string({ unit: 'grapheme', maxLength: 80 }),
      fc.uuid(),
      fc.uint8Array({ maxLength: 200 }),
    );
    const message = fc.oneof(
      fc.uint8Array({ maxLength: 300 }),
      fc.uint8Array({ minLength: 1000, maxLength: 5000 }),
      fc.constantFrom(55, 56, 63, 64, 119, 120, 128).map((n) => new Uint8Array(n).fill(n)),
    );
    fc.assert(
      fc.property(key, message, (k, m) => {
        const expected = createHmac('sha256', typeof k === 'string' ? Buffer.from(k, 'utf8') : k)
          .update(m)
          .digest();
        expect(Buffer.from(hmacJs(k, m)).equals(expected)).toBe(true);
        expect(hmacEqualsJs(k, m, new Uint8Array(expected))).toBe(true);
      }),
      { numRuns: 1000 },
    );
  });

  it('refuses any digest that differs in one bit, or in length', () => {
    const key = 'a3f1c2d4-0000-4000-8000-000000000001';
    const message = ascii('payment.session.succeeded|{"amount":100}');
    const mac = hmacJs(key, message);
    expect(hmacEqualsJs(key, message, mac)).toBe(true);
    for (let bit = 0; bit < 256; bit++) {
      const flipped = mac.slice();
      flipped[bit >> 3] = (flipped[bit >> 3] as number) ^ (1 << (bit & 7));
      expect(hmacEqualsJs(key, message, flipped), `bit ${bit}`).toBe(false);
    }
    expect(hmacEqualsJs(key, message, mac.subarray(0, 31))).toBe(false);
    expect(hmacEqualsJs(key, message, new Uint8Array([...mac, 0]))).toBe(false);
    const none = new Uint8Array(0);
    expect(hmacEqualsAnyJs(key, none, message, [mac.subarray(1), new Uint8Array(32), mac])).toBe(true);
    expect(hmacEqualsAnyJs(key, none, message, [new Uint8Array(32)])).toBe(false);
    expect(hmacEqualsAnyJs(key, none, message, [])).toBe(false);
  });

  it('hashes a head and a message as one, without joining them, wherever the block boundaries fall', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 100 }),
        fc.oneof(fc.uint8Array({ maxLength: 300 }), fc.uint8Array({ minLength: 1000, maxLength: 3000 })),
        (head, message) => {
          const key = 'a3f1c2d4-0000-4000-8000-000000000001';
          const mac = new Uint8Array(createHmac('sha256', key).update(head).update(message).digest());
          expect(hmacEqualsAnyJs(key, head, message, [mac])).toBe(true);
          expect(hmacEqualsAnyJs(key, head, message, [mac.map((b, k) => (k === 31 ? b ^ 1 : b))])).toBe(
            false,
          );
        },
      ),
      { numRuns: 1000 },
    );
  });
});

describe('the Web path: JavaScript or Web Crypto by size, same verdicts', { timeout: 60_000 }, () => {
  const secret = parseSigningSecret(generateSigningSecret());
  const other = parseSigningSecret(generateSigningSecret());

  it.each([
    ['at the threshold (JavaScript)', JS_HMAC_MAX_BYTES, 'number'],
    ['past it (Web Crypto)', JS_HMAC_MAX_BYTES + 1, 'object'],
  ])('%s', async (_, size, kind) => {
    const message = new Uint8Array(size).map((_, k) => k & 0xff);
    const mac = new Uint8Array(createHmac('sha256', secret.key).update(message).digest());
    expect(await hmacWeb(secret.key, message)).toEqual(mac);
    expect(await hmacVerifyWeb(secret.key, message, mac)).toBe(true);
    const head = 'evt_1.1800000000.';
    const tail = message.subarray(head.length);
    const found = firstMatchWeb([other.key, secret.key], head, tail, [new Uint8Array(32), mac.fill(0)]);
    const signed = new Uint8Array(createHmac('sha256', secret.key).update(head).update(tail).digest());
    expect(typeof found).toBe(kind);
    expect(await found).toBe(-1);
    expect(await firstMatchWeb([other.key, secret.key], head, tail, [new Uint8Array(32), signed])).toBe(1);
    expect(await firstMatchWeb([other.key], head, tail, [signed])).toBe(-1);
    expect(await firstMatchWeb([secret.key], head, tail, [signed])).toBe(0);
  });

  it('verifies bodies on either side of it as the Node path does', async () => {
    const businessId = '5b1e1f0a-0c3d-4a8e-9e51-3f0d2c6a7b19';
    for (const target of [JS_HMAC_MAX_BYTES - 200, JS_HMAC_MAX_BYTES + 2000]) {
      const payment = createTestPayment({ method: 'card', status: 'settled' });
      const items = payment.metadata.order.items;
      const first = items[0] as (typeof items)[number];
      while (JSON.stringify(payment).length < target) items.push({ ...first, name: `item ${items.length}` });
      const body = encodeSignedEvent('payment.session.succeeded', payment, businessId);
      const forged = body.replace('"amount":', '"amount":1');
      const headers = signWebhook({ id: 'evt_1', body, secrets: [secret] });
      for (const [text, ids] of [
        [body, [businessId]],
        [forged, [businessId]],
        [body, ['someone-else', businessId]],
      ] as const) {
        const web = await verifyChecksumAsync({ rawBody: text }, { businessIds: ids, crypto: 'web' });
        const node = verifyChecksum({ rawBody: text }, { businessIds: ids });
        expect(web.ok ? web.businessId : web.error.code).toBe(node.ok ? node.businessId : node.error.code);
        const options = { secrets: [other, secret] };
        const webSignature = await verifyWebhookSignatureAsync(readSignatureHeaders(headers), text, {
          ...options,
          crypto: 'web',
        });
        const nodeSignature = verifyWebhookSignature(readSignatureHeaders(headers), text, options);
        expect(webSignature).toEqual(nodeSignature);
      }
    }
  });
});
