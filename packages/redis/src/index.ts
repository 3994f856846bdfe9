export type { RedisStore, RedisStoreOptions } from './redis-store.js';
export { createRedisStore, StoreTimeoutError } from './redis-store.js';
