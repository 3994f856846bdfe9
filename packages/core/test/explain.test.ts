import { describe, expect, it } from 'vitest';
import { computeChecksum, explainChecksumMismatch, formatMismatch } from '../src/index.js';
import { bodyWith, signText } from './fixtures/encode.js';

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
