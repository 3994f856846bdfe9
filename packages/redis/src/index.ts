export type { RedisPersistence } from './durability.js';
export { ReplicationTimeoutError } from './durability.js';
export type { RedisStoreOptions } from './options.js';
export type { RedisStore } from './redis-store.js';
export { createRedisStore, StoreTimeoutError } from './redis-store.js';
