import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalSignedData } from '../src/canonical-json.js';
import { lexicalEnvelope, lexicalTextOf, type ParsedEnvelope, parseEnvelope } from '../src/envelope.js';
import {
  canonicalJson,
  computeChecksum,
  encodeEnvelope,
  encodeSignedEvent,
  verifyChecksum,
} from '../src/index.js';

const BIZ = '8f0c6a42-7f3e-4c1b-9d2e-2b8a4f6e1c55';

const eventArb = fc.oneof(
  fc.constantFrom('payment.session.created', 'payment.session.succeeded', 'payment.session.failed'),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 20 }),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 8 }).filter((s) => s.isWellFormed()),
);

/** `data` as the service sends it (an object), sometimes with a `checksum` key of its own. */
const dataArb = fc.oneof(
  fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 4 }), { maxKeys: 6 }),
  fc.record({ checksum: fc.jsonValue({ maxDepth: 2 }), id: fc.string() }),
  fc.jsonValue({ maxDepth: 3 }),
);

const keyArb = fc.oneof(fc.constant(BIZ), fc.string({ minLength: 1, maxLength: 80 }));

describe('encodeSignedEvent', () => {
  it('writes the sender layout, data in RFC 8785 form', () => {
    const body = encodeSignedEvent('payment.session.created', { b: 1, a: 'x/é' }, BIZ);
    const checksum = computeChecksum('payment.session.created', { a: 'x/é', b: 1 }, BIZ);
    expect(body).toBe(
      `{"event":"payment.session.created","data":{"a":"x/é","b":1},"checksum":"${checksum}"}`,
    );
  });

  it('sends a checksum key of data, and signs data without it', () => {
    const body = encodeSignedEvent('e', { checksum: 'mine', id: 1 }, BIZ);
    expect(JSON.parse(body).data).toEqual({ checksum: 'mine', id: 1 });
    expect(JSON.parse(body).checksum).toBe(computeChecksum('e', { id: 1 }, BIZ));
    expect(verifyChecksum({ rawBody: body }, { businessIds: [BIZ] }).ok).toBe(true);
  });

  // The receiver's fast path matches the sender's layout as text: whatever the encoder writes must
  // take it, or every event the sender sends would silently go the slow way.
  it('writes what the receiver reads on its fast path, and parseEnvelope reads it back', () => {
    fc.assert(
      fc.property(eventArb, dataArb, keyArb, (event, data, businessId) => {
        const body = encodeSignedEvent(event, data, businessId);
        const lexical = lexicalEnvelope(body);
        expect(lexical.senderLayout).toBe(true);
        expect(lexical.data).toBe(canonicalSignedData(data));
        // The general reading of the same body (a leading space) agrees.
        expect(lexicalEnvelope(` ${body}`)).toEqual({ data: lexical.data, senderLayout: false });

        const envelope = parseEnvelope({ rawBody: body });
        expect(envelope.payload.event).toBe(event);
        expect(envelope.payload.data).toEqual(JSON.parse(canonicalJson(data)));
        expect(envelope.payload.checksum).toBe(computeChecksum(event, data, businessId));
        expect(lexicalTextOf(envelope)).toBe(lexical.data);
        for (const canonicalization of ['auto', 'lexical', 'jcs'] as const) {
          const result = verifyChecksum({ rawBody: body }, { businessIds: [businessId], canonicalization });
          expect(result.ok && result.canonicalization, canonicalization).toBe(
            canonicalization === 'jcs' ? 'jcs' : 'lexical',
          );
        }
      }),
      { numRuns: 500 },
    );
  });
});

describe('encodeEnvelope', () => {
  it('splices data text in as it is, and parseEnvelope reads back what it was given', () => {
    fc.assert(
      fc.property(eventArb, fc.jsonValue({ maxDepth: 3 }), fc.boolean(), (event, value, spaced) => {
        const dataText = JSON.stringify(value, null, spaced ? 2 : undefined) ?? 'null';
        const checksum = 'aB'.repeat(32);
        const body = encodeEnvelope(event, dataText, checksum);
        expect(body).toBe(`{"event":${JSON.stringify(event)},"data":${dataText},"checksum":"${checksum}"}`);
        const envelope = parseEnvelope({ rawBody: body });
        expect(envelope.payload).toEqual({ event, data: JSON.parse(dataText), checksum });
        expect(envelope.expected).toEqual(Buffer.from(checksum, 'hex'));
        // Whitespace inside data is not layout: the fast path still takes the body.
        expect(lexicalEnvelope(body).senderLayout).toBe(dataText[0] !== ' ' && dataText[0] !== '\n');
      }),
      { numRuns: 300 },
    );
  });
});

describe('lexicalTextOf', () => {
  it("is an envelope's own data after other bodies were read, in either layout", () => {
    const bodies = [
      encodeSignedEvent('payment.session.succeeded', { b: 'é', a: [1, { d: 2, c: 3 }] }, BIZ),
      JSON.stringify({ checksum: '0'.repeat(64), data: { z: 1, y: '\u{1F600}' }, event: 'e' }, null, 2),
      encodeSignedEvent('e', { only: true }, BIZ),
    ];
    const envelopes = bodies.map((body) => parseEnvelope({ rawBody: Buffer.from(body) }));
    // Each read wrote over the buffers the one before it returned a view into.
    expect(envelopes.map(lexicalTextOf)).toEqual(bodies.map((body) => lexicalEnvelope(body).data));
    expect(lexicalTextOf(envelopes[1] as ParsedEnvelope)).toBe('{"y":"\u{1F600}","z":1}');
    const verified = bodies.map(
      (body) => verifyChecksum({ rawBody: body }, { businessIds: [BIZ], canonicalization: 'lexical' }).ok,
    );
    expect(verified).toEqual([true, false, true]); // the second carries a made-up checksum
  });
});
