import { createHmac } from 'node:crypto';
import {
  type Canonicalization,
  computeChecksum,
  computeChecksumAsync,
  createReceiver,
  encodeEnvelope,
  explainChecksumMismatch,
  explainChecksumMismatchAsync,
  generateSigningKeyPair,
  generateSigningSecret,
  readSignatureHeaders,
  signWebhook,
  type VerifyResult,
  verifyChecksum,
  verifyChecksumAsync,
  verifyWebhookSignature,
  verifyWebhookSignatureAsync,
} from '@payhook/core';
import { createTestEvent } from '@payhook/core/testing';
import fc from 'fast-check';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { rfc8785Vectors } from './fixtures/rfc8785.js';
import { signBothSchemes } from './fixtures/signatures.js';

// The same vectors through both paths: node:crypto (synchronous) and Web Crypto (forced with
// `crypto: 'web'`, as where node:crypto is missing). Every verdict, code and field must agree.

const BIZ = '5b1e1f0a-0c3d-4a8e-9e51-3f0d2c6a7b19';
const OTHER = 'a3f1c2d4-0000-4000-8000-000000000001';
const modes: Canonicalization[] = ['auto', 'lexical', 'jcs'];

/** A verdict as comparable data: the error's class and code, not its object identity. */
const verdictOf = (result: VerifyResult) =>
  result.ok
    ? {
        ok: true,
        businessId: result.businessId,
        canonicalization: result.canonicalization,
        event: result.event,
      }
    : { ok: false, code: result.error.code, message: result.error.message };

async function bothChecksum(
  rawBody: string | Uint8Array,
  businessIds: string[],
  canonicalization?: Canonicalization,
) {
  const options = { businessIds, ...(canonicalization ? { canonicalization } : {}) };
  const node = verdictOf(verifyChecksum({ rawBody }, options));
  const web = verdictOf(await verifyChecksumAsync({ rawBody }, { ...options, crypto: 'web' }));
  expect(web).toEqual(node);
  return node;
}

describe('checksums on Web Crypto', { timeout: 60_000 }, () => {
  const vectors = rfc8785Vectors();

  it.each(vectors)(
    'RFC 8785 vector $name: the same checksum, the same verdicts in every mode',
    async ({ input }) => {
      const data = JSON.parse(input) as unknown;
      const checksum = computeChecksum('vector.test', data, BIZ);
      expect(await computeChecksumAsync('vector.test', data, BIZ, { crypto: 'web' })).toBe(checksum);
      // The vector's input as written (not canonical): lexical fails and jcs verifies.
      const body = encodeEnvelope('vector.test', input.trim(), checksum);
      for (const mode of modes) await bothChecksum(body, [BIZ], mode);
      expect((await bothChecksum(body, [BIZ], 'jcs')).ok).toBe(true);
      // The wrong id, then the right one second: the same business id matched on both paths.
      expect((await bothChecksum(body, [OTHER])).ok).toBe(false);
      expect(await bothChecksum(body, [OTHER, BIZ])).toMatchObject({ ok: true, businessId: BIZ });
      // A checksum one digit off.
      const off = encodeEnvelope(
        'vector.test',
        input.trim(),
        `${checksum.slice(0, 63)}${checksum[63] === '0' ? '1' : '0'}`,
      );
      expect(await bothChecksum(off, [BIZ])).toMatchObject({ ok: false, code: 'invalid_checksum' });
    },
  );

  it('computes what an independent HMAC gives, non-ASCII ids included', async () => {
    for (const id of [BIZ, 'é-ünïcode-🚀', 'x'.repeat(100)]) {
      const data = { amount: 1, note: 'é' };
      const expected = createHmac('sha256', Buffer.from(id, 'utf8'))
        .update(`payment.session.succeeded|{"amount":1,"note":"é"}`)
        .digest('hex');
      expect(await computeChecksumAsync('payment.session.succeeded', data, id, { crypto: 'web' })).toBe(
        expected,
      );
      expect(computeChecksum('payment.session.succeeded', data, id)).toBe(expected);
    }
  });

  it('agrees on generated bodies in any key order and spacing, signed or forged, as text or bytes', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 6 }),
        fc.constantFrom(...modes),
        fc.boolean(),
        fc.integer({ min: 0, max: 3 }),
        async (data, mode, asBytes, tamper) => {
          const checksum = computeChecksum('x.y', data, BIZ);
          let text = JSON.stringify({ data, checksum, event: 'x.y' }, null, tamper === 1 ? 2 : undefined);
          if (tamper === 2) text = text.replace(checksum, checksum.toUpperCase());
          const signedWith = tamper === 3 ? [OTHER] : [OTHER, BIZ];
          const raw = asBytes ? new TextEncoder().encode(text) : text;
          await bothChecksum(raw, signedWith, mode);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('refuses malformed bodies with the same codes', async () => {
    const valid = JSON.stringify(createTestEvent('payment.session.succeeded', BIZ));
    for (const body of [
      '',
      'not json',
      '[]',
      '{"event":"x","data":{}}',
      '{"event":"x","data":{},"checksum":"zz"}',
      valid.replace('{"event":', '{"event":"a","event":'),
      `${'['.repeat(70)}${']'.repeat(70)}`,
      new Uint8Array([0x7b, 0xff, 0x7d]),
    ]) {
      expect(await bothChecksum(body, [BIZ])).toMatchObject({ ok: false });
    }
    expect(await bothChecksum(valid, [BIZ])).toMatchObject({ ok: true });
  });
});

describe('Standard Webhooks signatures on Web Crypto', () => {
  const SECRET = generateSigningSecret();
  const PREVIOUS = generateSigningSecret();
  const body = JSON.stringify(createTestEvent('payment.session.succeeded', BIZ));

  async function both(
    headers: Record<string, string>,
    b: string | Uint8Array,
    secrets: string[],
    now?: number,
  ) {
    const received = readSignatureHeaders(headers);
    const options = { secrets, ...(now === undefined ? {} : { now }) };
    const node = verifyWebhookSignature(received, b, options);
    const web = await verifyWebhookSignatureAsync(received, b, { ...options, crypto: 'web' });
    const plain = (r: typeof node) =>
      r.ok ? r : { ok: false, code: r.error.code, message: r.error.message };
    expect(plain(web)).toEqual(plain(node));
    return plain(node);
  }

  it('gives the specification example the same verdict', async () => {
    const headers = {
      'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek',
      'webhook-timestamp': '1614265330',
      'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
    };
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    expect(await both(headers, '{"test": 2432232314}', [secret], 1614265330_000)).toMatchObject({ ok: true });
    expect(await both(headers, '{"test": 2432232315}', [secret], 1614265330_000)).toMatchObject({
      ok: false,
    });
  });

  it('agrees on rotation, tampering, spellings and malformed headers', async () => {
    const signed = signWebhook({ id: 'evt_1', body, secrets: [PREVIOUS, SECRET] });
    const sig = signed['webhook-signature'];
    const current = sig.split(' ')[1] as string;
    const rows: [Record<string, string>, string | Uint8Array, string[]][] = [
      [signed, body, [SECRET]],
      [signed, body, [PREVIOUS]],
      [signed, body, [SECRET, PREVIOUS]],
      [signed, new TextEncoder().encode(body), [SECRET]],
      [signed, `${body} `, [SECRET]],
      [signed, body, [generateSigningSecret()]],
      [{ ...signed, 'webhook-signature': current.replace(/=+$/, '') }, body, [SECRET]],
      [{ ...signed, 'webhook-signature': current.replace(/\+/g, '-').replace(/\//g, '_') }, body, [SECRET]],
      [{ ...signed, 'webhook-signature': `v2,${current.slice(3)} v1,AAAA ${current}` }, body, [SECRET]],
      [{ ...signed, 'webhook-signature': 'v1,!!!' }, body, [SECRET]],
      [{ ...signed, 'webhook-id': 'evt_2' }, body, [SECRET]],
      [{ ...signed, 'webhook-timestamp': '12x' }, body, [SECRET]],
      [{ ...signed, 'webhook-timestamp': String(Number(signed['webhook-timestamp']) - 301) }, body, [SECRET]],
      [{ 'webhook-id': 'evt_1' }, body, [SECRET]],
      [
        { ...signed, 'webhook-signature': new StandardWebhook(SECRET).sign('evt_1', new Date(), body) },
        body,
        [SECRET],
      ],
    ];
    for (const [headers, b, secrets] of rows) await both(headers, b, secrets);
  });

  it('verifies v1a after a v1 miss on Web Crypto although the body bytes are reused once the call returns', async () => {
    // Over 12 KB, the v1 HMAC goes to crypto.subtle: v1a is checked after that await.
    const large = JSON.stringify({
      ...createTestEvent('payment.session.succeeded', BIZ),
      pad: 'p'.repeat(20_000),
    });
    const pair = generateSigningKeyPair();
    const signed = signBothSchemes('evt_big', large, SECRET, pair.secretKey);
    const options = { secrets: [PREVIOUS], publicKeys: [pair.publicKey], crypto: 'web' as const };
    const bytes = new TextEncoder().encode(large);
    const pending = verifyWebhookSignatureAsync(readSignatureHeaders(signed), bytes, options);
    bytes.fill(0x20); // as a server reusing its read buffer for the next request
    expect(await pending).toMatchObject({ ok: true, scheme: 'v1a', publicKeyIndex: 0, secretIndex: -1 });
    const original = new TextEncoder().encode(large);
    const tampered = verifyWebhookSignatureAsync(readSignatureHeaders(signed), original, options);
    original.fill(0x20);
    expect(await verifyWebhookSignatureAsync(readSignatureHeaders(signed), original, options)).toMatchObject({
      ok: false,
    });
    expect(await tampered).toMatchObject({ ok: true, scheme: 'v1a' });
  });
});

describe('explanations on Web Crypto', () => {
  it('explain a checksum and a signature exactly as the Node path does', async () => {
    const secret = generateSigningSecret();
    const event = createTestEvent('payment.session.succeeded', BIZ);
    const body = JSON.stringify(event);
    const pair = generateSigningKeyPair();
    // Both schemes listed: the explanation shows each secret's v1 signature and each public key's verdict.
    const signed = signBothSchemes('evt_x', body, secret, pair.secretKey);
    const rows = [
      { rawBody: body, businessIds: [BIZ], headers: signed },
      { rawBody: body, businessIds: [OTHER, 'é'], headers: { ...signed, 'webhook-id': 'evt_y' } },
      { rawBody: body.replace('"amount":', '"amount": '), businessIds: [BIZ], headers: signed },
      { rawBody: 'not json', businessIds: [BIZ], headers: {} },
    ];
    for (const { rawBody, businessIds, headers } of rows) {
      const options = {
        businessIds,
        signature: {
          headers,
          secrets: [secret, generateSigningSecret()],
          publicKeys: [generateSigningKeyPair().publicKey, pair.publicKey],
          now: Date.now(),
        },
      };
      const node = explainChecksumMismatch({ rawBody }, options);
      const web = await explainChecksumMismatchAsync({ rawBody }, { ...options, crypto: 'web' });
      expect(web).toEqual(node);
    }
    expect(explainChecksumMismatch({ rawBody: body }, { businessIds: [BIZ] }).ok).toBe(true);
  });
});

describe('the crypto option', () => {
  it('refuses a value it does not know, naming the option', async () => {
    const bad = 'subtle' as unknown as 'web';
    expect(() => createReceiver({ businessIds: [BIZ], allowAnyIp: true, crypto: bad })).toThrow(
      /Invalid crypto: subtle \(expected "auto", "node" or "web"\)/,
    );
    await expect(verifyChecksumAsync({ rawBody: '{}' }, { businessIds: [BIZ], crypto: bad })).rejects.toThrow(
      /Invalid crypto/,
    );
    // node:crypto is there on Node: 'node' and 'auto' take it.
    const receiver = createReceiver({
      businessIds: [BIZ],
      allowAnyIp: true,
      crypto: 'node',
      recoveryIntervalMs: 0,
    });
    await receiver.close();
  });
});
