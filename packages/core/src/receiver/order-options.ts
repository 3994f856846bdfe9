import type { KnownEventName, PayhookEvent } from '../events/types.js';
import type { IdempotencyStore, ObjectOrderStore } from '../store/types.js';
import type { Logger } from './logger.js';
import type { EventHandler } from './types.js';

/**
 * The lifecycle rank of each event payhook knows, for per-object order (docs/design.md,
 * "Per-object order"): an event whose rank is lower than the highest one already handled for
 * its payment session is stale, and goes to `onStale` instead of its handlers. `created` comes
 * first; `succeeded` and `failed` both end a session and share a rank, so neither makes the other
 * stale. Ranks leave room (10 apart) for events the service may add between them; rank events
 * payhook does not know with the `orderRank` option.
 *
 * @example
 * ```ts
 * createReceiver({
 *   businessIds, allowedIps,
 *   orderRank: (event) => (event.event === 'payment.session.captured' ? 15 : undefined),
 * });
 * EVENT_RANKS['payment.session.succeeded']; // 20
 * ```
 */
export const EVENT_RANKS: Readonly<Record<KnownEventName, number>> = Object.freeze({
  'payment.session.created': 10,
  'payment.session.succeeded': 20,
  'payment.session.failed': 20,
});

/**
 * The object an event belongs to by default: the payment session's id (`data.id`) of an event
 * payhook knows; undefined (not ordered) for any other event.
 *
 * @example
 * ```ts
 * createReceiver({
 *   businessIds, allowedIps,
 *   orderKey: (event) => (event.event.startsWith('payment.refund.') ? `refund:${(event.data as { id: string }).id}` : defaultOrderKey(event)),
 * });
 * ```
 */
export function defaultOrderKey(event: PayhookEvent): string | undefined {
  if (!Object.hasOwn(EVENT_RANKS, event.event)) return undefined;
  const id = (event.data as { id?: unknown } | null | undefined)?.id;
  return typeof id === 'string' && id.length > 0 ? id : undefined;
}

/** The rank of a known event in {@link EVENT_RANKS}; undefined for any other. */
function defaultOrderRank(event: PayhookEvent): number | undefined {
  return Object.hasOwn(EVENT_RANKS, event.event) ? EVENT_RANKS[event.event as KnownEventName] : undefined;
}

/** Per-object order as a receiver runs it, once its options are checked. */
export interface ResolvedOrder {
  store: ObjectOrderStore;
  /** The object of an event, or undefined when it is not ordered. */
  key(event: PayhookEvent): string | undefined;
  /** The rank of an event: the `orderRank` option's, else {@link EVENT_RANKS}'s. */
  rank(event: PayhookEvent): number | undefined;
  /** The handlers of `onStale`. */
  staleHandlers: EventHandler<PayhookEvent>[];
}

/** The options of per-object order (see {@link ReceiverOptions}). */
interface OrderOptions {
  order?: boolean | undefined;
  orderKey?: ((event: PayhookEvent) => string | undefined) | undefined;
  orderRank?: ((event: PayhookEvent) => number | undefined) | undefined;
}

/**
 * Checks the order options (a TypeError names the bad one) against the store: order is on by
 * default where the store has it; a store without it is refused when an order option was given,
 * and otherwise named in an info line at creation.
 */
export function resolveOrder(
  options: OrderOptions,
  store: IdempotencyStore,
  logger: Logger,
): ResolvedOrder | undefined {
  const { order, orderKey, orderRank } = options;
  if (order !== undefined && typeof order !== 'boolean') {
    throw new TypeError(`Invalid order: ${String(order)} (expected true or false).`);
  }
  for (const [name, value] of [
    ['orderKey', orderKey],
    ['orderRank', orderRank],
  ] as const) {
    if (value !== undefined && typeof value !== 'function') {
      throw new TypeError(`Invalid ${name}: expected a function of the event, got ${typeof value}.`);
    }
  }
  if (order === false) {
    if (orderKey !== undefined || orderRank !== undefined) {
      throw new TypeError('Give order: false or orderKey / orderRank, not both.');
    }
    return undefined;
  }
  const capability = store.order;
  if (capability === undefined) {
    if (order === true || orderKey !== undefined || orderRank !== undefined) {
      throw new TypeError(
        'Invalid order: this store does not keep per-object order (it has no `order`); use the memory or Redis store, or pass order: false.',
      );
    }
    // Info, not a warning: a store of one's own written before per-object order is no mistake.
    logger.info(
      {},
      'payhook: the store does not keep per-object order, so events of one payment may run at once and out of order; pass order: false to say that is intended',
    );
    return undefined;
  }
  const rank =
    orderRank === undefined
      ? defaultOrderRank
      : (event: PayhookEvent) => orderRank(event) ?? defaultOrderRank(event);
  return { store: capability, key: orderKey ?? defaultOrderKey, rank, staleHandlers: [] };
}
