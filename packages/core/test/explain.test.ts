import { describe, expect, it } from 'vitest';
import {
  computeChecksum,
  explainChecksumMismatch,
  explainSignature,
  formatMismatch,
  formatSignatureExplanation,
  generateSigningKeyPair,
  generateSigningSecret,
  readSignatureHeaders,
  signWebhookV1a,
} from '../src/index.js';
import { bodyWith, signText } from './fixtures/encode.js';
import { signBothSchemes } from './fixtures/signatures.js';

const BIZ = 'biz-7f3e';
const EVENT = 'payment.session.created';

describe('explainChecksumMismatch', () => {
  it('shows each encoding, the string hashed, each key, and where encodings differ', () => {
    const data = '{"amount":1.0,"note":"a\\/b"}';
    const rawBody = bodyWith(EVENT, data, signText(EVENT, data, 'another-business'));
    const explanation = explainChecksumMismatch({ rawBody }, { businessIds: [BIZ, 'old-id'] });
    expect(explanation.ok).toBe(false);
    expect(explanation.event).toBe(EVENT);
    expect(explanation.candidates.map((c) => c.canonicalization)).toEqual(['lexical', 'jcs']);
    expect(explanation.candidates[0]?.message).toBe(`${EVENT}|${data}`);
    expect(explanation.candidates[1]?.message).toBe(`${EVENT}|{"amount":1,"note":"a/b"}`);
    expect(explanation.candidates[0]?.attempts.map((a) => a.businessId)).toEqual([BIZ, 'old-id']);
    expect(
      explanation.candidates.every((c) =>
        c.attempts.every((a) => !a.matches && /^[0-9a-f]{64}$/.test(a.checksum)),
      ),
    ).toBe(true);
    expect(explanation.differences).toHaveLength(1);
    expect(explanation.differences[0]).toMatchObject({
      between: ['lexical', 'jcs'],
      offset: `${EVENT}|{"amount":1`.length,
    });

    const text = formatMismatch(explanation);
    expect(text).toContain('does not verify');
    expect(text).toContain(`${EVENT}|{"amount":1.0`);
    expect(text).toContain('differ at offset');
    expect(text).toContain('Hints');
  });

  it('says which key and encoding match when the checksum verifies', () => {
    const payment = { id: 'p', amount: 100000 };
    const rawBody = JSON.stringify({
      event: EVENT,
      data: payment,
      checksum: computeChecksum(EVENT, payment, BIZ),
    });
    const explanation = explainChecksumMismatch({ rawBody }, { businessIds: ['x', BIZ] });
    expect(explanation.ok).toBe(true);
    expect(explanation.candidates[0]?.attempts[1]).toMatchObject({ businessId: BIZ, matches: true });
    expect(formatMismatch(explanation)).toContain('MATCH');
  });

  it('explains a body it cannot read, without throwing', () => {
    const explanation = explainChecksumMismatch({ rawBody: '{"event":' }, { businessIds: [BIZ] });
    expect(explanation.error?.code).toBe('malformed_payload');
    expect(formatMismatch(explanation)).toMatch(/could not be read/);
  });
});

describe('explainSignature', () => {
  const body = '{"event":"payment.session.created","data":{}}';

  it('says which v1a public key verifies a listed signature, and that another key pair does not', () => {
    const pair = generateSigningKeyPair();
    const other = generateSigningKeyPair();
    const headers = signWebhookV1a({ id: 'evt_1', body, secretKeys: [pair.secretKey] });
    const received = readSignatureHeaders(headers);
    const explanation = explainSignature(received, body, { publicKeys: [other.publicKey, pair.publicKey] });
    expect(explanation.ok).toBe(true);
    expect(explanation.publicKeys).toEqual([
      { index: 0, keyPrefix: `${other.publicKey.slice(0, 9)}...`, matches: false },
      { index: 1, keyPrefix: `${pair.publicKey.slice(0, 9)}...`, matches: true },
    ]);
    const text = formatSignatureExplanation(explanation);
    expect(text).toContain('The signature verifies.');
    expect(text).toContain(
      `no match  public key #1 (${other.publicKey.slice(0, 9)}...) -> verifies no listed v1a signature`,
    );
    expect(text).toContain(
      `MATCH  public key #2 (${pair.publicKey.slice(0, 9)}...) -> verifies a listed v1a signature`,
    );
    // The body changed after signing: no key verifies, and the string signed is shown.
    const tampered = explainSignature(received, `${body} `, { publicKeys: [pair.publicKey] });
    expect(tampered.ok).toBe(false);
    expect(tampered.publicKeys[0]?.matches).toBe(false);
    expect(tampered.signedContent).toBe(`evt_1.${headers['webhook-timestamp']}.${body} `);
  });

  it('explains v1 and v1a side by side, and names a public key it cannot read without throwing', () => {
    const secret = generateSigningSecret();
    const pair = generateSigningKeyPair();
    const received = readSignatureHeaders(signBothSchemes('evt_2', body, secret, pair.secretKey));
    const explanation = explainSignature(received, body, {
      secrets: [secret],
      publicKeys: ['whpk_not-a-key', pair.publicKey],
    });
    expect(explanation.ok).toBe(true);
    expect(explanation.secrets[0]?.matches).toBe(true);
    expect(explanation.publicKeys).toEqual([
      { index: 0, keyPrefix: '(invalid public key)', matches: false },
      { index: 1, keyPrefix: `${pair.publicKey.slice(0, 9)}...`, matches: true },
    ]);
    expect(explanation.listed).toHaveLength(2);
  });
});
