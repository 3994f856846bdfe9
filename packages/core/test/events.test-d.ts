import { describe, expectTypeOf, it } from 'vitest';
import {
  type CardPaymentMethod,
  createReceiver,
  type EventOf,
  isKnownEvent,
  isKnownPaymentMethod,
  KNOWN_EVENTS,
  type KnownEvent,
  type KnownEventName,
  type Payment,
  type PaymentSessionCreatedEvent,
  type PaymentSessionFailedEvent,
  type PaymentSessionSucceededEvent,
  type Receiver,
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

  it('types receiver.on handlers by the event name', () => {
    const receiver = createReceiver({ businessIds: ['b'], allowAnyIp: true });
    receiver.on('payment.session.created', (event) => {
      expectTypeOf(event).toEqualTypeOf<PaymentSessionCreatedEvent>();
      expectTypeOf(event.data.customer.email).toBeString();
    });
    receiver.on('payment.session.succeeded', (event) => {
      expectTypeOf(event).toEqualTypeOf<PaymentSessionSucceededEvent>();
    });
    receiver.on('payment.session.failed', (event) => {
      expectTypeOf(event).toEqualTypeOf<PaymentSessionFailedEvent>();
      expectTypeOf(event.data.cancellation_reason).toEqualTypeOf<string | null>();
    });
    receiver.on(['payment.session.succeeded', 'payment.session.failed'], (event) => {
      expectTypeOf(event.event).toEqualTypeOf<'payment.session.succeeded' | 'payment.session.failed'>();
    });
    receiver.on(KNOWN_EVENTS, (event) => {
      expectTypeOf(event).toEqualTypeOf<KnownEvent>();
    });
    const name = 'payment.session.failed' as KnownEventName;
    receiver.on(name, (event) => {
      expectTypeOf(event).toEqualTypeOf<KnownEvent>();
    });
  });

  it('takes names payhook does not know yet through onUnknown, their data unknown', () => {
    const receiver = createReceiver({ businessIds: ['b'], allowAnyIp: true });
    receiver.onUnknown('payment.refund.created', (event) => {
      expectTypeOf(event).toEqualTypeOf<UnknownEvent>();
      expectTypeOf(event.data).toBeUnknown();
      expectTypeOf(event.event).toBeString();
    });
    receiver.onUnknown(['payout.completed', 'payout.failed'], (event) => {
      expectTypeOf(event.data).toBeUnknown();
    });
    // A name only known at run time (configuration) is a string, which onUnknown takes.
    const configured: string = 'payment.dispute.opened';
    expectTypeOf(receiver.onUnknown(configured, () => {})).toEqualTypeOf<Receiver>();
    receiver.onUnrecognized(({ event, reason }) => {
      expectTypeOf(event.data).toBeUnknown();
      expectTypeOf(reason).toEqualTypeOf<'unknown_event' | 'invalid_data' | 'not_an_event'>();
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

  it('refuses a misspelled or unknown name in on(), and a known name in onUnknown()', () => {
    const receiver = createReceiver({ businessIds: ['b'], allowAnyIp: true });
    // @ts-expect-error misspelled: 'payment.session.succeeded'
    receiver.on('payment.session.succeded', () => {});
    // @ts-expect-error one misspelled name in a list
    receiver.on(['payment.session.created', 'payment.sesion.failed'], () => {});
    // @ts-expect-error a name payhook does not know goes through onUnknown
    receiver.on('payment.refund.created', () => {});
    const anyName: string = 'payment.session.created';
    // @ts-expect-error a plain string may be anything: narrow it with isKnownEventName first
    receiver.on(anyName, () => {});
    // @ts-expect-error a known name has its typed handler: on('payment.session.created', ...)
    receiver.onUnknown('payment.session.created', () => {});
    // @ts-expect-error the same inside a list
    receiver.onUnknown(['payment.refund.created', 'payment.session.failed'], () => {});
    receiver.onUnknown('payment.refund.created', (event) => {
      // @ts-expect-error data is unknown: validate it first
      event.data.amount;
    });
  });
});
