import { describe, expectTypeOf, it } from 'vitest';
import {
  type CardPaymentMethod,
  createReceiver,
  type EventOf,
  isKnownEvent,
  isKnownPaymentMethod,
  type KnownEvent,
  type KnownEventName,
  type Payment,
  type PaymentSessionSucceededEvent,
  type UnknownEvent,
} from '../src/index.js';

describe('event types', () => {
  it('narrows a known event by name to its payment', () => {
    const event = {} as KnownEvent;
    if (event.event === 'payment.session.succeeded') {
      expectTypeOf(event).toEqualTypeOf<PaymentSessionSucceededEvent>();
      expectTypeOf(event.data).toEqualTypeOf<Payment>();
      expectTypeOf(event.data.amount).toBeNumber();
    }
  });

  it('maps names to event types, and unknown names to UnknownEvent', () => {
    expectTypeOf<EventOf<'payment.session.failed'>['data']>().toEqualTypeOf<Payment>();
    expectTypeOf<EventOf<'payment.refund.created'>>().toEqualTypeOf<UnknownEvent>();
  });

  it('types receiver.on handlers by the event name; unknown names compile', () => {
    const receiver = createReceiver({ businessIds: ['b'], allowAnyIp: true });
    receiver.on('payment.session.created', (event) => {
      expectTypeOf(event.data.customer.email).toBeString();
    });
    receiver.on(['payment.session.succeeded', 'payment.session.failed'], (event) => {
      expectTypeOf(event.event).toEqualTypeOf<'payment.session.succeeded' | 'payment.session.failed'>();
    });
    receiver.on('payout.completed', (event) => {
      expectTypeOf(event.data).toBeUnknown();
    });
    receiver.onAny((event) => {
      if (isKnownEvent(event) && event.event === 'payment.session.failed') {
        expectTypeOf(event.data.cancellation_reason).toEqualTypeOf<string | null>();
      }
    });
  });

  it('narrows payment methods by type', () => {
    const payment = {} as Payment;
    const method = payment.payment_method;
    if (isKnownPaymentMethod(method) && method.type === 'card') {
      expectTypeOf(method).toEqualTypeOf<CardPaymentMethod>();
      expectTypeOf(method.expiry_year).toBeNumber();
    }
  });

  it('refuses what the types forbid', () => {
    const receiver = createReceiver({ businessIds: ['b'], allowAnyIp: true });
    receiver.on('payment.session.created', (event) => {
      // @ts-expect-error a created event's payment has no field "refunded_amount"
      event.data.refunded_amount;
    });
    // @ts-expect-error not an event name payhook knows
    const name: KnownEventName = 'payment.session.refunded';
    expectTypeOf(name).toBeString();
    receiver.onAny((event) => {
      // @ts-expect-error data is unknown until the event is narrowed
      event.data.amount;
    });
  });
});
