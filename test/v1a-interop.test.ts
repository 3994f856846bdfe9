import {
  generateSigningKeyPair,
  readSignatureHeaders,
  signingPublicKeyOf,
  signWebhookV1a,
  verifyWebhookSignature,
  verifyWebhookSignatureAsync,
} from '@payhook/core';
import { describe, expect, it } from 'vitest';
import {
  ed25519PublicKeyText,
  generateEd25519KeyPair,
  parseEd25519SecretKey,
  signV1a,
} from '../packages/sender/src/signing/ed25519.js';

// The sender signs v1a with its own module; receivers verify with core's. Their keys and
// signatures must be each other's, on both of core's crypto paths.

const body = '{"event":"payment.session.succeeded","data":{"amount":100,"note":"é"}}';

async function bothPaths(headers: Record<string, string>, publicKeys: string[]) {
  const received = readSignatureHeaders(headers);
  const node = verifyWebhookSignature(received, body, { publicKeys });
  const web = await verifyWebhookSignatureAsync(received, body, { publicKeys, crypto: 'web' });
  expect(web).toEqual(node);
  return node;
}

describe('v1a between the sender and core', () => {
  it("core's receivers verify what the sender signs, through a rotation", async () => {
    const previous = generateEd25519KeyPair();
    const current = generateEd25519KeyPair();
    expect(signingPublicKeyOf(current.secretKey)).toBe(current.publicKey);
    const timestamp = Math.floor(Date.now() / 1000);
    const signature = signV1a({
      id: 'evt_1',
      timestamp,
      body,
      keys: [parseEd25519SecretKey(previous.secretKey), parseEd25519SecretKey(current.secretKey)],
    });
    const headers = {
      'webhook-id': 'evt_1',
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signature,
    };
    expect(await bothPaths(headers, [current.publicKey])).toMatchObject({
      ok: true,
      scheme: 'v1a',
      publicKeyIndex: 0,
    });
    expect(await bothPaths(headers, [previous.publicKey])).toMatchObject({ ok: true, scheme: 'v1a' });
    expect(await bothPaths(headers, [generateEd25519KeyPair().publicKey])).toMatchObject({ ok: false });
    expect(await bothPaths({ ...headers, 'webhook-id': 'evt_2' }, [current.publicKey])).toMatchObject({
      ok: false,
    });
  });

  it("the sender reads core's keys and signs what core signs, byte for byte", () => {
    const pair = generateSigningKeyPair();
    const key = parseEd25519SecretKey(pair.secretKey);
    expect(ed25519PublicKeyText(key)).toBe(pair.publicKey);
    const fromCore = signWebhookV1a({
      id: 'evt_3',
      body,
      secretKeys: [pair.secretKey],
      timestamp: 1_800_000_000,
    });
    expect(signV1a({ id: 'evt_3', timestamp: 1_800_000_000, body, keys: [key] })).toBe(
      fromCore['webhook-signature'],
    );
  });
});
