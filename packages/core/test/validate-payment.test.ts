import { PaymentSchema } from '@payhook/core';
import { createTestPayment, type TestPaymentMethod } from '@payhook/core/testing';
import fc from 'fast-check';
import { Compile } from 'typebox/compile';
import { describe, expect, it } from 'vitest';
import { paymentIssues } from '../src/events/validate-payment.js';

// The receiver checks payments with a validator written out (src/events/validate-payment.ts),
// not with TypeBox's compiler, which would be most of a receiver's weight in a browser or Worker
// bundle. These hold it to PaymentSchema, the published definition: same verdict on every value.

const reference = Compile(PaymentSchema);
const METHODS: TestPaymentMethod[] = [
  'card',
  'bank_account',
  'etransfer',
  'wallet',
  'crypto_address',
  'none',
];

/** Every path into a JSON value, as lists of keys, the root included. */
function pathsOf(value: unknown, at: (string | number)[] = []): (string | number)[][] {
  const out = [at];
  if (Array.isArray(value)) {
    for (let k = 0; k < value.length; k++) out.push(...pathsOf(value[k], [...at, k]));
  } else if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) out.push(...pathsOf(item, [...at, key]));
  }
  return out;
}

/** `value` with the member at `path` replaced (or deleted, for undefined). */
function withAt(value: unknown, path: (string | number)[], replacement: unknown): unknown {
  if (path.length === 0) return replacement;
  const copy = structuredClone(value) as Record<string | number, unknown>;
  let node = copy;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string | number, unknown>;
  const last = path[path.length - 1] as string | number;
  if (replacement === undefined && !Array.isArray(node)) delete node[last];
  else node[last] = replacement;
  return copy;
}

const REPLACEMENTS: unknown[] = [
  undefined,
  null,
  0,
  -1,
  1.5,
  2 ** 53,
  -(2 ** 53),
  Number.MAX_SAFE_INTEGER,
  '',
  'N',
  'NG',
  'NGN',
  'USD',
  'CAD',
  'EUR',
  'test',
  'live',
  'settled',
  'pending',
  'refunded',
  'card',
  'bank_account',
  'crypto_address',
  'etransfer',
  '🇳🇬',
  'é',
  true,
  [],
  {},
  { type: 'card' },
  { type: 'wallet', anything: 1 },
  { type: 7 },
  [{ name: 'a', type: 'b' }],
];

describe('the payment validator', { timeout: 60_000 }, () => {
  it('gives the verdict of PaymentSchema on every test payment, and on each one changed at any member', () => {
    const payments = METHODS.map((method) => createTestPayment({ method }));
    fc.assert(
      fc.property(
        fc.constantFrom(...payments),
        fc.nat(),
        fc.constantFrom(...REPLACEMENTS),
        fc.boolean(),
        (payment, index, replacement, extra) => {
          const paths = pathsOf(payment);
          let value = withAt(payment, paths[index % paths.length] as (string | number)[], replacement);
          // Extra members are allowed everywhere: add one at the root sometimes.
          if (extra && value !== null && typeof value === 'object' && !Array.isArray(value)) {
            value = { ...value, unexpected: { nested: true } };
          }
          const issues = paymentIssues(value, '/data');
          expect(issues.length === 0, JSON.stringify(value)).toBe(reference.Check(value));
          for (const issue of issues) expect(issue.path.startsWith('/data')).toBe(true);
        },
      ),
      { numRuns: 3000 },
    );
  });

  it('accepts every test payment and names what is missing or wrong', () => {
    for (const method of METHODS) expect(paymentIssues(createTestPayment({ method }))).toEqual([]);
    const payment = createTestPayment({ method: 'card' }) as unknown as Record<string, unknown>;
    const { id: _, ...withoutId } = payment;
    expect(paymentIssues(withoutId, '/data')).toEqual([
      { path: '/data', message: "must have required property 'id'" },
    ]);
    expect(paymentIssues({ ...payment, amount: -1 }, '/data')).toEqual([
      { path: '/data/amount', message: 'must be greater or equal to 0' },
    ]);
    expect(paymentIssues({ ...payment, currency: 'EUR' }, '/data')[0]?.path).toBe('/data/currency');
    expect(paymentIssues(null, '/data')).toEqual([{ path: '/data', message: 'must be object' }]);
    // Lengths as JSON Schema counts them, whatever the UTF-16 length.
    for (const country of ['', 'N', 'NG', 'NGN', '🇳🇬', 'é', 'éé', '𝒜', '𝒜𝒜']) {
      const customer = payment.customer as Record<string, unknown>;
      const value = {
        ...payment,
        customer: { ...customer, billing_address: { ...(customer.billing_address as object), country } },
      };
      expect(paymentIssues(value).length === 0, country).toBe(reference.Check(value));
    }
  });
});
