/**
 * `@payhook/sender/internal`: the statements of the delivery state machine, for the benchmarks
 * and tests that drive them directly. Not public API: they change in any release, without notice.
 *
 * @example
 * ```ts
 * import { claimDeliveries } from '@payhook/sender/internal';
 * const { claims } = await database.delivery((db) => claimDeliveries(db, { now, leaseMs, limit: 32 }));
 * ```
 */

export { DELIVERY_POOL_SIZE } from './db/database.js';
export * from './delivery/delivery-state.js';
