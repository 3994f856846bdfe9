import type { Payment } from './schemas.js';

/**
 * The events payhook knows (docs/service-interface.md, "Events"). More may come.
 *
 * @example
 * ```ts
 * receiver.on(KNOWN_EVENTS, (event) => audit.record(event.event, event.data.id));
 * ```
 */
export const KNOWN_EVENTS = [
  'payment.session.created',
  'payment.session.succeeded',
  'payment.session.failed',
] as const;

/** The name of an event payhook knows. */
export type KnownEventName = (typeof KNOWN_EVENTS)[number];

/** A payment session was created; `data` is the payment (status `pending`). */
export interface PaymentSessionCreatedEvent {
  event: 'payment.session.created';
  data: Payment;
  checksum: string;
}

/** A payment session succeeded; `data` is the payment (status `settled`). */
export interface PaymentSessionSucceededEvent {
  event: 'payment.session.succeeded';
  data: Payment;
  checksum: string;
}

/** A payment session failed; `data` is the payment (status `failed`, with `cancellation_reason`). */
export interface PaymentSessionFailedEvent {
  event: 'payment.session.failed';
  data: Payment;
  checksum: string;
}

/** Known events by name. */
export interface KnownEventMap {
  'payment.session.created': PaymentSessionCreatedEvent;
  'payment.session.succeeded': PaymentSessionSucceededEvent;
  'payment.session.failed': PaymentSessionFailedEvent;
}

/** Any event payhook knows; `switch (event.event)` narrows it. */
export type KnownEvent = KnownEventMap[KnownEventName];

/** An authentic event payhook does not know (a new event name), or whose data did not validate. */
export interface UnknownEvent {
  event: string;
  data: unknown;
  checksum: string;
}

/**
 * Every authentic event: known ones typed, unknown ones still delivered. Narrow with
 * `isKnownEvent(event)` first, then by `event.event`.
 */
export type PayhookEvent = KnownEvent | UnknownEvent;

/** The event type of a name: the typed event for a known name, {@link UnknownEvent} otherwise. */
export type EventOf<Name extends string> = Name extends KnownEventName ? KnownEventMap[Name] : UnknownEvent;
