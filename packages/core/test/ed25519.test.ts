import {
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  sign,
  verify,
  type webcrypto,
} from 'node:crypto';
import {
  type CryptoPath,
  createReceiver,
  generateSigningKeyPair,
  generateSigningKeyPairAsync,
  generateSigningSecret,
  parseSigningPublicKey,
  parseSigningSecretKey,
  type ReceiverOptions,
  readSignatureHeaders,
  SIGNING_PUBLIC_KEY_PREFIX,
  SIGNING_SECRET_KEY_PREFIX,
  signingPublicKeyOf,
  signingPublicKeyOfAsync,
  signV1a,
  signV1aAsync,
  signWebhook,
  signWebhookV1a,
  signWebhookV1aAsync,
  verifyWebhookSignature,
  verifyWebhookSignatureAsync,
} from '@payhook/core';
import { createTestEvent } from '@payhook/core/testing';
import { describe, expect, it } from 'vitest';

/*
 * Standard Webhooks asymmetric signatures, tested against reference signers written here from the
 * specification's text alone: the signed content is `id.timestamp.body`, the signature entry is
 * `v1a,` and the base64 of the 64-byte Ed25519 signature, `whpk_` is the base64 of the 32 raw
 * public key bytes. One reference is node:crypto, the other Web Crypto.
 */

const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
const b64url = (text: string) => Buffer.from(text, 'base64url');

interface Reference {
  publicKey: string;
  sign(content: string): Promise<string>;
}

/** A signer on node:crypto: generateKeyPairSync('ed25519'), the raw public key from its JWK. */
function nodeReference(): Reference {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const { x } = publicKey.export({ format: 'jwk' });
  return {
    publicKey: `whpk_${b64(b64url(x as string))}`,
    sign: async (content) => `v1a,${b64(sign(null, Buffer.from(content), privateKey))}`,
  };
}

/** A signer on Web Crypto: generateKey Ed25519, the public key exported raw. */
async function webReference(): Promise<Reference> {
  const pair = (await crypto.subtle.generateKey({ name: 'Ed25519' }, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  const raw = new Uint8Array(await crypto.subtle.exportKey('raw', pair.publicKey));
  return {
    publicKey: `whpk_${b64(raw)}`,
    sign: async (content) =>
      `v1a,${b64(new Uint8Array(await crypto.subtle.sign('Ed25519', pair.privateKey, new TextEncoder().encode(content))))}`,
  };
}

/** Verifies a v1a entry as the specification says, on node:crypto, independently of core. */
function referenceVerify(publicKey: string, entry: string, content: string): boolean {
  const x = Buffer.from(publicKey.slice(5), 'base64').toString('base64url');
  const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x }, format: 'jwk' });
  return verify(null, Buffer.from(content), key, Buffer.from(entry.slice(4), 'base64'));
}

const nowSeconds = () => Math.floor(Date.now() / 1000);
const PATHS: CryptoPath[] = ['node', 'web'];

/** verifyWebhookSignature on the chosen path (the synchronous one for `node`). */
async function verifyOn(
  path: CryptoPath,
  headers: Record<string, string>,
  body: string | Uint8Array,
  options: Parameters<typeof verifyWebhookSignature>[2],
) {
  const received = readSignatureHeaders(headers);
  return path === 'node'
    ? verifyWebhookSignature(received, body, options)
    : verifyWebhookSignatureAsync(received, body, { ...options, crypto: 'web' });
}

const headersOf = (id: string, timestamp: number, signature: string) => ({
  'webhook-id': id,
  'webhook-timestamp': String(timestamp),
  'webhook-signature': signature,
});

describe('Ed25519 keys', () => {
  it('generates whsk_/whpk_ pairs on node:crypto and on Web Crypto, each public key derivable from its secret', async () => {
    for (const pair of [generateSigningKeyPair(), await generateSigningKeyPairAsync()]) {
      expect(pair.secretKey.startsWith(SIGNING_SECRET_KEY_PREFIX)).toBe(true);
      expect(pair.publicKey.startsWith(SIGNING_PUBLIC_KEY_PREFIX)).toBe(true);
      expect(Buffer.from(pair.publicKey.slice(5), 'base64')).toHaveLength(32);
      expect(Buffer.from(pair.secretKey.slice(5), 'base64')).toHaveLength(32);
      expect(signingPublicKeyOf(pair.secretKey)).toBe(pair.publicKey);
      expect(await signingPublicKeyOfAsync(pair.secretKey)).toBe(pair.publicKey);
      // The seed is RFC 8032's private key: node:crypto derives the same public key from it.
      const seed = Buffer.from(pair.secretKey.slice(5), 'base64').toString('base64url');
      const jwk = createPublicKey(
        createPrivateKey({
          key: {
            kty: 'OKP',
            crv: 'Ed25519',
            d: seed,
            x: Buffer.from(pair.publicKey.slice(5), 'base64').toString('base64url'),
          },
          format: 'jwk',
        }),
      ).export({ format: 'jwk' });
      expect(`whpk_${b64(b64url(jwk.x as string))}`).toBe(pair.publicKey);
    }
    expect(generateSigningKeyPair().secretKey).not.toBe(generateSigningKeyPair().secretKey);
  });

  it('reads the 64-byte secret key form (seed, then public key) and refuses one whose halves do not belong together', async () => {
    const a = generateSigningKeyPair();
    const b = generateSigningKeyPair();
    const seed = Buffer.from(a.secretKey.slice(5), 'base64');
    const long = `whsk_${b64(Buffer.concat([seed, Buffer.from(a.publicKey.slice(5), 'base64')]))}`;
    expect(Buffer.from(parseSigningSecretKey(long).seed).equals(seed)).toBe(true);
    expect(signingPublicKeyOf(long)).toBe(a.publicKey);
    const mismatched = `whsk_${b64(Buffer.concat([seed, Buffer.from(b.publicKey.slice(5), 'base64')]))}`;
    expect(() => signingPublicKeyOf(mismatched)).toThrow(/does not belong/);
    await expect(signingPublicKeyOfAsync(mismatched)).rejects.toThrow(/does not belong/);
  });

  it('refuses malformed whpk_ keys with a TypeError that says what is wrong', () => {
    const good = generateSigningKeyPair().publicKey;
    const cases: [string, RegExp][] = [
      [good.replace('whpk_', 'whsk_'), /expected "whpk_"/],
      [generateSigningSecret(), /expected "whpk_"/],
      ['whpk_', /0 bytes of key/],
      [`whpk_${b64(Buffer.alloc(31, 1))}`, /31 bytes of key/],
      [`whpk_${b64(Buffer.alloc(33, 1))}`, /33 bytes of key/],
      ['whpk_not base64!', /not base64/],
      [`${good.slice(0, 10)}=${good.slice(11)}`, /not base64/],
    ];
    for (const [key, message] of cases) expect(() => parseSigningPublicKey(key), key).toThrow(message);
    expect(() => parseSigningPublicKey(42 as unknown as string)).toThrow(TypeError);
    // URL-safe and unpadded spellings of a good key are the same key.
    const bytes = Buffer.from(good.slice(5), 'base64');
    expect(Buffer.from(parseSigningPublicKey(`whpk_${bytes.toString('base64url')}`).key).equals(bytes)).toBe(
      true,
    );
    for (const [key] of cases) {
      expect(() =>
        createReceiver({ businessIds: ['b'], allowAnyIp: true, signingPublicKeys: [key] }),
      ).toThrow(/Invalid signingPublicKeys\[0\]/);
    }
    expect(() =>
      createReceiver({
        businessIds: ['b'],
        allowAnyIp: true,
        signingPublicKeys: good as unknown as string[],
      }),
    ).toThrow(/Invalid signingPublicKeys: expected an array/);
  });
});

describe('v1a signatures', () => {
  const body = '{"event":"payment.session.succeeded","data":{"amount":100}}';

  it('signs what an independent verifier accepts, on node:crypto and on Web Crypto alike (Ed25519 is deterministic)', async () => {
    const { secretKey, publicKey } = generateSigningKeyPair();
    const ts = nowSeconds();
    const entry = signV1a(secretKey, 'msg_1', String(ts), body);
    expect(entry).toMatch(/^v1a,[A-Za-z0-9+/]{86}==$/);
    expect(referenceVerify(publicKey, entry, `msg_1.${ts}.${body}`)).toBe(true);
    expect(referenceVerify(publicKey, entry, `msg_1.${ts}.${body} `)).toBe(false);
    expect(await signV1aAsync(secretKey, 'msg_1', String(ts), body)).toBe(entry);
    expect(signV1a(secretKey, 'msg_1', String(ts), new TextEncoder().encode(body))).toBe(entry);
    const headers = signWebhookV1a({ id: 'msg_1', body, secretKeys: [secretKey], timestamp: ts });
    expect(headers).toEqual(headersOf('msg_1', ts, entry));
    expect(await signWebhookV1aAsync({ id: 'msg_1', body, secretKeys: [secretKey], timestamp: ts })).toEqual(
      headers,
    );
    expect(() => signWebhookV1a({ id: '', body, secretKeys: [secretKey] })).toThrow(/webhook id/);
    expect(() => signWebhookV1a({ id: 'x', body, secretKeys: [] })).toThrow(/at least one secret key/);
    expect(() => signWebhookV1a({ id: 'x', body, secretKeys: ['whsec_abc'] })).toThrow(/expected "whsk_"/);
  });

  for (const path of PATHS) {
    describe(`verified on ${path === 'node' ? 'node:crypto' : 'Web Crypto'}`, () => {
      it('accepts signatures from the node:crypto and the Web Crypto reference signers', async () => {
        for (const reference of [nodeReference(), await webReference()]) {
          const ts = nowSeconds();
          const entry = await reference.sign(`evt_1.${ts}.${body}`);
          const result = await verifyOn(path, headersOf('evt_1', ts, entry), body, {
            publicKeys: [reference.publicKey],
          });
          expect(result).toEqual({
            ok: true,
            id: 'evt_1',
            timestamp: ts,
            scheme: 'v1a',
            secretIndex: -1,
            publicKeyIndex: 0,
          });
          // The body as bytes verifies the same.
          expect(
            (
              await verifyOn(path, headersOf('evt_1', ts, entry), Buffer.from(body), {
                publicKeys: [reference.publicKey],
              })
            ).ok,
          ).toBe(true);
        }
      });

      it('refuses forged and mutated bodies, ids, timestamps and signatures', async () => {
        const reference = nodeReference();
        const ts = nowSeconds();
        const entry = await reference.sign(`evt_1.${ts}.${body}`);
        const options = { publicKeys: [reference.publicKey] };
        const refused = async (headers: Record<string, string>, b: string) => {
          const result = await verifyOn(path, headers, b, options);
          expect(result.ok, JSON.stringify(headers)).toBe(false);
          return result.ok ? undefined : result.error.code;
        };
        expect(await refused(headersOf('evt_1', ts, entry), body.replace('100', '1'))).toBe(
          'invalid_signature',
        );
        expect(await refused(headersOf('evt_1', ts, entry), `${body}\n`)).toBe('invalid_signature');
        expect(await refused(headersOf('evt_2', ts, entry), body)).toBe('invalid_signature');
        expect(await refused(headersOf('evt_1', ts - 1, entry), body)).toBe('invalid_signature');
        // One bit of the signature flipped.
        const sig = Buffer.from(entry.slice(4), 'base64');
        sig[10] = (sig[10] as number) ^ 1;
        expect(await refused(headersOf('evt_1', ts, `v1a,${b64(sig)}`), body)).toBe('invalid_signature');
        // Signed by another key pair (a forger with their own key).
        const forger = nodeReference();
        expect(await refused(headersOf('evt_1', ts, await forger.sign(`evt_1.${ts}.${body}`)), body)).toBe(
          'invalid_signature',
        );
        // Truncated, not base64, empty.
        expect(await refused(headersOf('evt_1', ts, entry.slice(0, 40)), body)).toBe('invalid_signature');
        expect(await refused(headersOf('evt_1', ts, 'v1a,!!!!'), body)).toBe('invalid_signature');
        expect(await refused(headersOf('evt_1', ts, 'v1a,'), body)).toBe('invalid_signature');
        // Out of the tolerance, even with a valid signature.
        const old = ts - 3600;
        expect(
          await refused(headersOf('evt_1', old, await reference.sign(`evt_1.${old}.${body}`)), body),
        ).toBe('signature_timestamp_out_of_tolerance');
      });

      it('refuses a signature under the wrong scheme: the Ed25519 bytes as v1, an HMAC as v1a, unknown versions', async () => {
        const reference = nodeReference();
        const secret = generateSigningSecret();
        const ts = nowSeconds();
        const entry = await reference.sign(`evt_1.${ts}.${body}`);
        const hmacEntry = signWebhook({ id: 'evt_1', body, secrets: [secret], timestamp: ts })[
          'webhook-signature'
        ];
        const both = { publicKeys: [reference.publicKey], secrets: [secret] };
        for (const signature of [
          `v1,${entry.slice(4)}`,
          `v2a,${entry.slice(4)}`,
          `V1A,${entry.slice(4)}`,
          `v1a ${entry.slice(4)}`,
          entry.slice(4),
          `v1a,${hmacEntry.slice(3)}`,
        ]) {
          const result = await verifyOn(path, headersOf('evt_1', ts, signature), body, both);
          expect(result.ok, signature).toBe(false);
        }
        // A v1a signature with only secrets configured is not accepted, nor a v1 with only public keys.
        expect((await verifyOn(path, headersOf('evt_1', ts, entry), body, { secrets: [secret] })).ok).toBe(
          false,
        );
        const onlyKeys = await verifyOn(path, headersOf('evt_1', ts, hmacEntry), body, {
          publicKeys: [reference.publicKey],
        });
        expect(onlyKeys).toMatchObject({ ok: false, error: { code: 'invalid_signature' } });
        expect(onlyKeys.ok ? '' : onlyKeys.error.message).toMatch(/lists no v1a signature/);
      });

      it('rotates: old key, new key, both listed; any configured key that verifies passes', async () => {
        const previous = nodeReference();
        const current = await webReference();
        const stranger = nodeReference();
        const ts = nowSeconds();
        const content = `evt_r.${ts}.${body}`;
        const oldEntry = await previous.sign(content);
        const newEntry = await current.sign(content);
        const strangerEntry = await stranger.sign(content);
        const keys = [previous.publicKey, current.publicKey];
        const at = async (signature: string, publicKeys: string[]) =>
          verifyOn(path, headersOf('evt_r', ts, signature), body, { publicKeys });
        expect(await at(oldEntry, keys)).toMatchObject({ ok: true, publicKeyIndex: 0 });
        expect(await at(newEntry, keys)).toMatchObject({ ok: true, publicKeyIndex: 1 });
        expect(await at(`${strangerEntry} ${newEntry}`, keys)).toMatchObject({ ok: true, publicKeyIndex: 1 });
        expect(await at(`${oldEntry} ${newEntry}`, [current.publicKey])).toMatchObject({
          ok: true,
          publicKeyIndex: 0,
        });
        // After the rotation the previous key is dropped: its signature alone no longer passes.
        expect((await at(oldEntry, [current.publicKey])).ok).toBe(false);
        expect((await at(strangerEntry, keys)).ok).toBe(false);
      });

      it('mixes v1 and v1a: secrets and public keys together accept either', async () => {
        const reference = nodeReference();
        const secret = generateSigningSecret();
        const ts = nowSeconds();
        const v1a = await reference.sign(`evt_m.${ts}.${body}`);
        const v1 = signWebhook({ id: 'evt_m', body, secrets: [secret], timestamp: ts })['webhook-signature'];
        const options = { secrets: [secret], publicKeys: [reference.publicKey] };
        expect(await verifyOn(path, headersOf('evt_m', ts, v1), body, options)).toMatchObject({
          ok: true,
          scheme: 'v1',
          secretIndex: 0,
          publicKeyIndex: -1,
        });
        expect(await verifyOn(path, headersOf('evt_m', ts, v1a), body, options)).toMatchObject({
          ok: true,
          scheme: 'v1a',
          publicKeyIndex: 0,
        });
        expect((await verifyOn(path, headersOf('evt_m', ts, `${v1} ${v1a}`), body, options)).ok).toBe(true);
      });
    });
  }
});

describe('a receiver with signingPublicKeys', () => {
  const BIZ = 'b7e1c2d3-4f5a-4b6c-8d7e-9f0a1b2c3d4e';

  async function run(options: Partial<ReceiverOptions>, headers: Record<string, string>, body: string) {
    const receiver = createReceiver({
      businessIds: [BIZ],
      allowAnyIp: true,
      recoveryIntervalMs: 0,
      ...options,
    });
    const handled: string[] = [];
    receiver.onAny((event) => {
      handled.push(event.event);
    });
    const result = await receiver.handle({
      method: 'POST',
      contentType: 'application/json',
      remoteAddress: '127.0.0.1',
      headers: { 'content-type': 'application/json', ...headers },
      rawBody: body,
    });
    await result.afterResponse?.();
    await receiver.idle();
    await receiver.close();
    return {
      status: result.status,
      code: (result.body as { error?: { code: string } }).error?.code,
      handled,
    };
  }

  for (const crypto of PATHS) {
    it(`verifies v1a signatures and requires them with public keys alone (crypto: ${crypto})`, async () => {
      const { secretKey, publicKey } = generateSigningKeyPair();
      const stranger = generateSigningKeyPair();
      const secret = generateSigningSecret();
      const body = JSON.stringify(createTestEvent('payment.session.succeeded', BIZ));
      const signed = signWebhookV1a({ id: 'evt_a', body, secretKeys: [secretKey] });
      const options = { signingPublicKeys: [publicKey], requireSignature: true, crypto };
      expect(await run(options, signed, body)).toEqual({
        status: 200,
        code: undefined,
        handled: ['payment.session.succeeded'],
      });
      expect(await run(options, {}, body)).toMatchObject({
        status: 401,
        code: 'signature_required',
        handled: [],
      });
      const forged = signWebhookV1a({ id: 'evt_a', body, secretKeys: [stranger.secretKey] });
      expect(await run(options, forged, body)).toMatchObject({
        status: 401,
        code: 'invalid_signature',
        handled: [],
      });
      // The body changed after signing, its checksum recomputed: the signature still refuses it.
      const changed = body.replace('"amount":', '"amount":1');
      expect(await run(options, signed, changed)).toMatchObject({ status: 401, handled: [] });
      // An HMAC signature with only public keys configured does not pass.
      const hmacSigned = signWebhook({ id: 'evt_a', body, secrets: [secret] });
      expect(await run(options, hmacSigned, body)).toMatchObject({ status: 401, code: 'invalid_signature' });
      // With the secret too, either kind passes.
      const mixed = { ...options, signingSecrets: [secret] };
      expect(await run(mixed, hmacSigned, body)).toMatchObject({ status: 200 });
      expect(await run(mixed, signed, body)).toMatchObject({ status: 200 });
      // Rotation: the receiver lists the old and the new public key.
      const next = generateSigningKeyPair();
      const rotating = { ...options, signingPublicKeys: [publicKey, next.publicKey] };
      const both = signWebhookV1a({ id: 'evt_b', body, secretKeys: [secretKey, next.secretKey] });
      const newOnly = signWebhookV1a({ id: 'evt_c', body, secretKeys: [next.secretKey] });
      expect(await run(rotating, both, body)).toMatchObject({ status: 200 });
      expect(await run(rotating, newOnly, body)).toMatchObject({ status: 200 });
      expect(await run(rotating, signed, body)).toMatchObject({ status: 200 });
    });
  }

  it('needs signingSecrets or signingPublicKeys to require a signature', () => {
    expect(() => createReceiver({ businessIds: [BIZ], allowAnyIp: true, requireSignature: true })).toThrow(
      /signingSecrets or signingPublicKeys/,
    );
  });
});
