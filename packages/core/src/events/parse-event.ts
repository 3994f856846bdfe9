import {
  KNOWN_EVENTS,
  type KnownEvent,
  type KnownEventName,
  type PayhookEvent,
  type UnknownEvent,
} from './types.js';
import { paymentIssues } from './validate-payment.js';

/** One reason an event's data did not validate. */
export interface EventIssue {
  /** JSON pointer into the event, such as `/data/amount`. */
  path: string;
  message: string;
}

/** What {@link parseEvent} makes of a payload. */
export type ParseEventResult =
  | { kind: 'known'; event: KnownEvent }
  | {
      kind: 'unrecognized';
      /** The payload as an event, or undefined if it is not even an object with an `event` string. */
      event: UnknownEvent | undefined;
      reason: 'unknown_event' | 'invalid_data' | 'not_an_event';
      issues: EventIssue[];
    };

const known = new Set<string>(KNOWN_EVENTS);

/**
 * Types a verified payload: a known event name whose `data` is a valid payment gives the typed
 * event; anything else is "unrecognized" with the reason and the validation issues. Validation
 * is loose (extra fields allowed) and never throws; the event returned is the object passed in,
 * not a copy.
 *
 * @example
 * ```ts
 * const parsed = parseEvent(payload);
 * if (parsed.kind === 'known' && parsed.event.event === 'payment.session.succeeded') {
 *   console.log(parsed.event.data.amount);
 * }
 * ```
 */
export function parseEvent(payload: unknown): ParseEventResult {
  if (
    payload === null ||
    typeof payload !== 'object' ||
    typeof (payload as { event?: unknown }).event !== 'string'
  ) {
    return {
      kind: 'unrecognized',
      event: undefined,
      reason: 'not_an_event',
      issues: [{ path: '/event', message: 'must be a string' }],
    };
  }
  const event = payload as UnknownEvent;
  if (!known.has(event.event)) {
    return { kind: 'unrecognized', event, reason: 'unknown_event', issues: [] };
  }
  const issues = paymentIssues(event.data, '/data');
  if (issues.length === 0) return { kind: 'known', event: event as KnownEvent };
  return { kind: 'unrecognized', event, reason: 'invalid_data', issues };
}

/**
 * True for an event payhook knows (by name); `switch (event.event)` then narrows it.
 * It checks the name only: events handed to handlers were validated already.
 *
 * @example
 * ```ts
 * receiver.onAny((event) => {
 *   if (isKnownEvent(event) && event.event === 'payment.session.failed') console.log(event.data.cancellation_reason);
 * });
 * ```
 */
export function isKnownEvent(event: PayhookEvent): event is KnownEvent {
  return known.has(event.event);
}

/** True if `name` is an event name payhook knows. */
export function isKnownEventName(name: string): name is KnownEventName {
  return known.has(name);
}
