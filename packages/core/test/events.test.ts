import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isKnownEvent, isKnownPaymentMethod, KNOWN_EVENTS, PaymentSchema, parseEvent } from '../src/index.js';
import {
  createTestEvent,
  createTestPayment,
  signEvent,
  type TestPaymentMethod,
} from '../src/testing/index.js';

const METHODS: TestPaymentMethod[] = [
  'card',
  'bank_account',
  'etransfer',
  'wallet',
  'crypto_address',
  'none',
];

describe('parseEvent', () => {
  it.each(KNOWN_EVENTS.flatMap((name) => METHODS.map((method) => [name, method] as const)))(
    '%s with a %s payment parses as its typed event',
    (name, method) => {
      const event = createTestEvent(name, 'biz', { method });
      const parsed = parseEvent(event);
      expect(parsed.kind).toBe('known');
      expect(parsed.event).toBe(event);
    },
  );

  it('keeps extra fields and allows them at every level', () => {
    const payment = createTestPayment({ method: 'card' }) as Record<string, unknown>;
    payment.settlement_target = 'business';
    (payment.customer as Record<string, unknown>).business_id = 'b-1';
    (payment.payment_method as Record<string, unknown>).brand = 'visa';
    const event = { ...signEvent('payment.session.created', payment, 'biz'), delivery: 3 };
    const parsed = parseEvent(event);
    expect(parsed.kind).toBe('known');
    expect(parsed.event).toBe(event);
    expect(JSON.stringify(parsed.event)).toContain('"brand":"visa"');
  });

  it('accepts payment methods of types it does not know, fields kept', () => {
    const payment = createTestPayment({
      payment_method: { id: 'x', type: 'mobile_money', msisdn: '+2348000000000' },
    });
    const parsed = parseEvent(signEvent('payment.session.created', payment, 'biz'));
    expect(parsed.kind).toBe('known');
    expect(isKnownPaymentMethod(payment.payment_method)).toBe(false);
  });

  it('refuses a known method type with a broken shape', () => {
    const payment = createTestPayment({ payment_method: { id: 'x', type: 'card' } as never });
    expect(parseEvent(signEvent('payment.session.succeeded', payment, 'biz')).kind).toBe('unrecognized');
  });

  it('gives an unknown event name as unrecognized, unknown_event', () => {
    const event = signEvent('payment.refund.created', { id: 'r' }, 'biz');
    expect(parseEvent(event)).toEqual({ kind: 'unrecognized', event, reason: 'unknown_event', issues: [] });
  });

  it('gives a known name with invalid data as unrecognized, with the paths of the issues', () => {
    const payment = createTestPayment() as Record<string, unknown>;
    payment.amount = '250000';
    delete payment.id;
    const parsed = parseEvent(signEvent('payment.session.succeeded', payment, 'biz'));
    expect(parsed.kind).toBe('unrecognized');
    if (parsed.kind !== 'unrecognized') return;
    expect(parsed.reason).toBe('invalid_data');
    const paths = parsed.issues.map((i) => i.path);
    expect(paths).toContain('/data/amount');
    expect(parsed.issues.some((i) => i.path === '/data' && /id/.test(i.message))).toBe(true);
  });

  it('gives a non-event as unrecognized with no event', () => {
    for (const payload of [null, 1, 'x', [], { data: {} }, { event: 5 }]) {
      const parsed = parseEvent(payload);
      expect(parsed).toMatchObject({ kind: 'unrecognized', event: undefined, reason: 'not_an_event' });
    }
  });

  it('never throws', () => {
    fc.assert(
      fc.property(fc.anything(), fc.constantFrom(...KNOWN_EVENTS, 'other'), (data, event) => {
        parseEvent({ event, data, checksum: 'c' });
        parseEvent(data);
      }),
    );
  });

  it('isKnownEvent checks the name', () => {
    expect(isKnownEvent(createTestEvent('payment.session.failed', 'biz'))).toBe(true);
    expect(isKnownEvent({ event: 'x', data: null, checksum: '' })).toBe(false);
  });

  it('exports the payment schema as plain JSON Schema (for the sender and OpenAPI)', () => {
    const schema = JSON.parse(JSON.stringify(PaymentSchema));
    expect(schema).toMatchObject({ type: 'object', title: 'Payment', additionalProperties: true });
    expect(schema.required).toContain('payment_method');
  });
});
