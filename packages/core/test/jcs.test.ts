import canonicalize from 'canonicalize';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, isPayhookError } from '../src/index.js';
import { rfc8785Vectors } from './fixtures/rfc8785.js';

const vectors = rfc8785Vectors();

describe('canonicalJson: RFC 8785 vectors', () => {
  it('finds the vectors', () => {
    expect(vectors.length).toBeGreaterThanOrEqual(6);
  });

  it.each(vectors)('$name canonicalizes byte for byte', ({ input, expected }) => {
    expect(Buffer.from(canonicalJson(JSON.parse(input)), 'utf8').equals(expected)).toBe(true);
  });
});

describe('canonicalJson', () => {
  it('matches the canonicalize package on any JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(canonicalJson(value)).toBe(canonicalize(value));
      }),
      { numRuns: 2000 },
    );
  });

  it('matches canonicalize on objects with integer-like, unicode and empty keys', () => {
    const key = fc.oneof(fc.string(), fc.constantFrom('', '10', '9', '1', 'é', '\u{1F600}', 'a', 'A', '_'));
    const tree = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: 'small' },
        fc.double({ noNaN: true, noDefaultInfinity: true }),
        fc.string({ unit: 'grapheme' }),
        fc.array(tie('node'), { maxLength: 4 }),
        fc.dictionary(key, tie('node'), { maxKeys: 5 }),
      ),
    }));
    fc.assert(
      fc.property(tree.node, (value) => {
        expect(canonicalJson(value)).toBe(canonicalize(value));
      }),
      { numRuns: 1000 },
    );
  });

  it('sorts keys by UTF-16 code units, not by code point or locale', () => {
    // U+1F600 is encoded as the surrogate pair D83D DE00, which sorts below U+FFFD.
    expect(canonicalJson({ '\uFFFD': 1, '\u{1F600}': 2, b: 3, B: 4, '10': 5, '9': 6 })).toBe(
      '{"10":5,"9":6,"B":4,"b":3,"\u{1F600}":2,"\uFFFD":1}',
    );
  });

  it('encodes numbers the ECMAScript way', () => {
    expect(canonicalJson([1.0, 1e2, -0, 1e21, 1e-7, 0.1 + 0.2, 2 ** 53 + 2])).toBe(
      '[1,100,0,1e+21,1e-7,0.30000000000000004,9007199254740994]',
    );
  });

  it('follows JSON.stringify for undefined, toJSON and sparse arrays', () => {
    const date = new Date('2026-01-02T03:04:05.000Z');
    expect(canonicalJson({ b: undefined, a: date, c: [undefined, () => 1] })).toBe(
      '{"a":"2026-01-02T03:04:05.000Z","c":[null,null]}',
    );
  });

  it.each([
    ['NaN', Number.NaN],
    ['Infinity', Number.POSITIVE_INFINITY],
    ['a bigint', 10n],
    ['a lone surrogate', { a: '\uD800' }],
    ['undefined', undefined],
  ])('refuses %s with malformed_payload', (_name, value) => {
    try {
      canonicalJson(value);
      expect.unreachable();
    } catch (error) {
      expect(isPayhookError(error) && error.code).toBe('malformed_payload');
    }
  });

  it('refuses a circular reference', () => {
    const value: Record<string, unknown> = { b: 1, a: 2 };
    value.self = value;
    expect(() => canonicalJson(value)).toThrow(/circular/);
  });

  /** `levels` objects (keys out of order, so the general encoder runs) or arrays nested in each other. */
  const nested = (levels: number, kind: 'object' | 'array'): unknown =>
    JSON.parse(
      kind === 'object'
        ? `${'{"b":1,"a":'.repeat(levels)}0${'}'.repeat(levels)}`
        : `${'[1,'.repeat(levels)}0${']'.repeat(levels)}`,
    );

  it.each(['object', 'array'] as const)(
    'encodes 1,000 levels of %s nesting and refuses deeper with malformed_payload, never a RangeError',
    (kind) => {
      expect(canonicalJson(nested(1000, kind))).toBe(canonicalize(nested(1000, kind)));
      // 4,000 levels overflowed the stack; 100,000 is far past any stack.
      for (const levels of [1001, 4000, 100_000]) {
        try {
          canonicalJson(nested(levels, kind));
          expect.unreachable();
        } catch (error) {
          expect(error).not.toBeInstanceOf(RangeError);
          expect(isPayhookError(error) && error.code).toBe('malformed_payload');
          expect((error as Error).message).toMatch(/deeper than 1000 levels/);
        }
      }
    },
  );

  it('refuses a chain of toJSON results that never ends with malformed_payload', () => {
    const endless = (): unknown => ({ toJSON: endless });
    try {
      canonicalJson(endless());
      expect.unreachable();
    } catch (error) {
      expect(isPayhookError(error) && error.code).toBe('malformed_payload');
    }
  });
});
