import { createHmac } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checksumBytes } from '../src/envelope.js';
import { canonicalJson, computeChecksum, lexicalCanonicalJson, verifyChecksum } from '../src/index.js';
import { bodyWith, looseJson, phpJson, signText } from './fixtures/encode.js';

const BIZ = '8f0c6a42-7f3e-4c1b-9d2e-2b8a4f6e1c55';
const EVENT = 'payment.session.succeeded';
const modes = ['auto', 'lexical', 'jcs'] as const;

const payment = {
  id: 'a2f6c7a0-5d6b-4d3e-9c61-0f8f3b1a2c3d',
  amount: 250000,
  currency: 'NGN',
  description: 'Order #1042 / 2 items',
  status: 'settled',
  customer: { first_name: 'Adaeze', last_name: 'Okafor', billing_address: { city: 'Lagos', line2: '' } },
  metadata: { order: { identifier: 'ORD-1042', items: [{ name: 'Café au lait', type: 'physical' }] } },
  payment_method: null,
};

function signedBody(data: unknown, event = EVENT, businessId = BIZ): string {
  return JSON.stringify({ event, data, checksum: computeChecksum(event, data, businessId) });
}

/** A JSON object (the only kind of `data` the service sends), keys of any kind. */
const dataArb = fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 4 }), { minKeys: 1, maxKeys: 6 });

describe('computeChecksum', () => {
  it('is HMAC-SHA256 of event|canonical(data) keyed by the business id, lowercase hex', () => {
    const expected = createHmac('sha256', Buffer.from(BIZ, 'utf8'))
      .update(`${EVENT}|${canonicalJson(payment)}`)
      .digest('hex');
    expect(computeChecksum(EVENT, payment, BIZ)).toBe(expected);
    expect(expected).toMatch(/^[0-9a-f]{64}$/);
  });

  it('leaves a top-level checksum key of data out', () => {
    expect(computeChecksum(EVENT, { ...payment, checksum: 'x' }, BIZ)).toBe(
      computeChecksum(EVENT, payment, BIZ),
    );
  });

  it('keys by UTF-8 bytes of a non-ASCII business id', () => {
    const id = 'bizé';
    const expected = createHmac('sha256', Buffer.from(id, 'utf8')).update(`${EVENT}|{}`).digest('hex');
    expect(computeChecksum(EVENT, {}, id)).toBe(expected);
  });
});

describe('verifyChecksum', () => {
  it.each(modes)('accepts a signed payment in %s mode (raw body)', (mode) => {
    const result = verifyChecksum(
      { rawBody: signedBody(payment) },
      { businessIds: [BIZ], canonicalization: mode },
    );
    expect(result).toMatchObject({ ok: true, event: EVENT, businessId: BIZ, data: payment });
  });

  it('accepts a parsed payload (jcs) and hands back that very object', () => {
    const payload = JSON.parse(signedBody(payment));
    const result = verifyChecksum({ payload }, { businessIds: [BIZ] });
    expect(result.ok && result.payload).toBe(payload);
    expect(result.ok && result.canonicalization).toBe('jcs');
  });

  it('accepts raw bodies as Uint8Array', () => {
    const result = verifyChecksum({ rawBody: Buffer.from(signedBody(payment)) }, { businessIds: [BIZ] });
    expect(result.ok).toBe(true);
  });

  it('says which of several business ids matched', () => {
    const result = verifyChecksum(
      { rawBody: signedBody(payment) },
      { businessIds: ['old-id', BIZ, 'other'] },
    );
    expect(result.ok && result.businessId).toBe(BIZ);
  });

  it('accepts upper-case hex', () => {
    const body = JSON.parse(signedBody(payment));
    body.checksum = body.checksum.toUpperCase();
    expect(verifyChecksum({ rawBody: JSON.stringify(body) }, { businessIds: [BIZ] }).ok).toBe(true);
  });

  it('refuses the wrong key with invalid_checksum and a message that says what to check', () => {
    const result = verifyChecksum({ rawBody: signedBody(payment) }, { businessIds: ['someone-else'] });
    expect(result.ok).toBe(false);
    expect(!result.ok && result.error.code).toBe('invalid_checksum');
    expect(!result.ok && result.error.status).toBe(401);
    expect(!result.ok && result.error.message).toMatch(/business id/);
  });

  it.each([
    ['not JSON', '{"event":'],
    ['an array', '[]'],
    ['a string', '"x"'],
    ['no event', `{"data":{},"checksum":"${'a'.repeat(64)}"}`],
    ['an empty event', `{"event":"","data":{},"checksum":"${'a'.repeat(64)}"}`],
    ['no data', `{"event":"x","checksum":"${'a'.repeat(64)}"}`],
    ['no checksum', '{"event":"x","data":{}}'],
    ['a short checksum', `{"event":"x","data":{},"checksum":"${'a'.repeat(63)}"}`],
    ['a non-hex checksum', `{"event":"x","data":{},"checksum":"${'g'.repeat(64)}"}`],
    ['a numeric checksum', '{"event":"x","data":{},"checksum":1}'],
    ['duplicate keys in data', `{"event":"x","data":{"a":1,"a":2},"checksum":"${'a'.repeat(64)}"}`],
    [
      'duplicate keys, differently escaped',
      `{"event":"x","data":{"a":1,"\\u0061":2},"checksum":"${'a'.repeat(64)}"}`,
    ],
    ['duplicate top-level keys', `{"event":"x","data":{},"checksum":"${'a'.repeat(64)}","event":"y"}`],
    [
      'duplicate keys deep down',
      `{"event":"x","data":{"b":[{"z":1,"y":2,"z":3}]},"checksum":"${'a'.repeat(64)}"}`,
    ],
    [
      'nesting deeper than 64',
      `{"event":"x","data":${'['.repeat(64)}${']'.repeat(64)},"checksum":"${'a'.repeat(64)}"}`,
    ],
    ['invalid UTF-8', Buffer.from([0x7b, 0xff, 0x7d])],
    ['an empty body', ''],
  ])('refuses %s with malformed_payload in every mode', (_name, rawBody) => {
    for (const mode of modes) {
      const result = verifyChecksum({ rawBody }, { businessIds: [BIZ], canonicalization: mode });
      expect(!result.ok && result.error.code, mode).toBe('malformed_payload');
      expect(!result.ok && result.error.status).toBe(400);
    }
  });

  it('accepts nesting of exactly 64 levels', () => {
    const data = `${'['.repeat(63)}${']'.repeat(63)}`;
    const rawBody = bodyWith('x', data, signText('x', data, BIZ));
    expect(verifyChecksum({ rawBody }, { businessIds: [BIZ] }).ok).toBe(true);
  });

  it('refuses a parsed payload that is not an object', () => {
    for (const payload of [null, 1, 'x', [], { event: 'x' }]) {
      const result = verifyChecksum({ payload }, { businessIds: [BIZ] });
      expect(!result.ok && result.error.code).toBe('malformed_payload');
    }
  });

  it('throws a TypeError for options that cannot work', () => {
    expect(() =>
      verifyChecksum({ payload: {} }, { businessIds: [BIZ], canonicalization: 'lexical' }),
    ).toThrow(TypeError);
    expect(() => verifyChecksum({ rawBody: '{}' }, { businessIds: [] })).toThrow(TypeError);
  });

  it('never throws on bad input', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.uint8Array(), fc.json()), (rawBody) => {
        const result = verifyChecksum({ rawBody }, { businessIds: [BIZ] });
        expect(result.ok).toBe(false);
      }),
    );
    fc.assert(
      fc.property(fc.anything(), (payload) => {
        expect(verifyChecksum({ payload }, { businessIds: [BIZ] }).ok).toBe(false);
      }),
    );
  });
});

describe('verifyChecksum properties', () => {
  it('key order and whitespace never change the outcome', () => {
    fc.assert(
      fc.property(dataArb, fc.string({ minLength: 1 }), fc.integer(), (data, event, seed) => {
        let state = seed >>> 0 || 1;
        const rand = () => {
          state = (state * 1103515245 + 12345) >>> 0;
          return state / 2 ** 32;
        };
        const checksum = computeChecksum(event, data, BIZ);
        const rawBody = looseJson({ checksum, data, event }, rand);
        for (const mode of modes) {
          const result = verifyChecksum({ rawBody }, { businessIds: [BIZ], canonicalization: mode });
          expect(result.ok, `${mode}: ${rawBody}`).toBe(true);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('any change to the decoded event or data fails verification', () => {
    const mutation = fc.constantFrom(
      'value',
      'add-key',
      'remove-key',
      'add-element',
      'remove-element',
      'event',
    );
    fc.assert(
      fc.property(dataArb, mutation, fc.jsonValue({ maxDepth: 1 }), (data, kind, extra) => {
        const checksum = computeChecksum(EVENT, data, BIZ);
        const copy: Record<string, unknown> = structuredClone(data);
        const keys = Object.keys(copy).filter((k) => k !== 'checksum');
        const first = keys[0];
        let event = EVENT;
        const arrayKey = keys.find((k) => Array.isArray(copy[k]));
        switch (kind) {
          case 'value':
            if (first === undefined) return;
            if (canonicalJson(copy[first]) === canonicalJson(extra)) return;
            copy[first] = extra;
            break;
          case 'add-key':
            if ('__added' in copy) return;
            copy.__added = extra;
            break;
          case 'remove-key':
            if (first === undefined) return;
            delete copy[first];
            break;
          case 'add-element':
            if (arrayKey === undefined) return;
            (copy[arrayKey] as unknown[]).push(extra);
            break;
          case 'remove-element':
            if (arrayKey === undefined || (copy[arrayKey] as unknown[]).length === 0) return;
            (copy[arrayKey] as unknown[]).pop();
            break;
          case 'event':
            event = `${EVENT}x`;
            break;
        }
        const rawBody = JSON.stringify({ event, data: copy, checksum });
        for (const mode of modes) {
          const result = verifyChecksum({ rawBody }, { businessIds: [BIZ], canonicalization: mode });
          expect(!result.ok && result.error.code, `${mode} ${kind}`).toBe('invalid_checksum');
        }
      }),
      { numRuns: 600 },
    );
  });

  it('lexical equals jcs on JCS-encoded bodies', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const jcs = canonicalJson(value);
        expect(lexicalCanonicalJson(jcs)).toBe(jcs);
        expect(lexicalCanonicalJson(JSON.stringify(value, null, 2))).toBe(jcs);
      }),
      { numRuns: 1000 },
    );
  });

  it('a PHP json_encode body verifies in lexical and auto mode, not in jcs', () => {
    const withEscapes = fc.record({
      url: fc.webUrl(),
      name: fc.string({ unit: 'binary-ascii' }).map((s) => `${s}é/ü`),
      nested: fc.array(fc.record({ note: fc.string({ unit: 'grapheme' }) }), { maxLength: 3 }),
    });
    fc.assert(
      fc.property(withEscapes, (data) => {
        const text = phpJson(data);
        const rawBody = bodyWith(EVENT, text, signText(EVENT, text, BIZ));
        const verify = (mode: (typeof modes)[number]) =>
          verifyChecksum({ rawBody }, { businessIds: [BIZ], canonicalization: mode });
        expect(verify('lexical')).toMatchObject({ ok: true, canonicalization: 'lexical' });
        expect(verify('auto')).toMatchObject({ ok: true, canonicalization: 'lexical' });
        expect(verify('jcs')).toMatchObject({ ok: false, error: { code: 'invalid_checksum' } });
      }),
      { numRuns: 300 },
    );
  });
});

describe('numbers in each mode', () => {
  // [as written in the body, as RFC 8785 re-encodes the parsed value]
  const cases = [
    ['1.0', '1'],
    ['1e2', '100'],
    ['-0', '0'],
    ['12345678901234567890', '12345678901234567000'],
    ['0.10', '0.1'],
  ] as const;

  it.each(cases)('%s signed as written verifies in lexical and auto, not jcs', (written) => {
    const data = `{"amount":${written}}`;
    const rawBody = bodyWith(EVENT, data, signText(EVENT, data, BIZ));
    const verify = (mode: (typeof modes)[number]) =>
      verifyChecksum({ rawBody }, { businessIds: [BIZ], canonicalization: mode });
    expect(verify('lexical').ok).toBe(true);
    expect(verify('auto')).toMatchObject({ ok: true, canonicalization: 'lexical' });
    expect(verify('jcs')).toMatchObject({ ok: false, error: { code: 'invalid_checksum' } });
  });

  it.each(cases)('%s signed as RFC 8785 (%s) verifies in jcs and auto, not lexical', (written, jcs) => {
    const rawBody = bodyWith(EVENT, `{"amount":${written}}`, signText(EVENT, `{"amount":${jcs}}`, BIZ));
    const verify = (mode: (typeof modes)[number]) =>
      verifyChecksum({ rawBody }, { businessIds: [BIZ], canonicalization: mode });
    expect(verify('lexical')).toMatchObject({ ok: false, error: { code: 'invalid_checksum' } });
    expect(verify('auto')).toMatchObject({ ok: true, canonicalization: 'jcs' });
    expect(verify('jcs').ok).toBe(true);
  });

  it('a large integer parses with lost precision, and the handler sees the parsed number', () => {
    const data = '{"amount":12345678901234567890}';
    const rawBody = bodyWith(EVENT, data, signText(EVENT, data, BIZ));
    const result = verifyChecksum({ rawBody }, { businessIds: [BIZ] });
    expect(result.ok && (result.data as { amount: number }).amount).toBe(12345678901234567000);
  });
});

describe('checksumBytes', () => {
  const HEX_64 = /^[0-9a-fA-F]{64}$/;
  // Hex digits of both cases, their neighbours in ASCII, and characters whose low byte is a digit.
  const unit = fc.constantFrom(...'0123456789abcdefABCDEF/:@G`g \u0130\u0161\u0e30'.split(''));

  it('reads exactly 64 hex digits of either case, as Buffer.from(hex) does', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ unit, minLength: 63, maxLength: 65 }),
          fc.stringMatching(/^[0-9a-fA-F]{64}$/),
          fc.string(),
        ),
        (checksum) => {
          const bytes = checksumBytes(checksum);
          if (HEX_64.test(checksum))
            expect(Buffer.from(bytes ?? []).equals(Buffer.from(checksum, 'hex'))).toBe(true);
          else expect(bytes).toBeUndefined();
        },
      ),
      { numRuns: 2000 },
    );
  });
});
