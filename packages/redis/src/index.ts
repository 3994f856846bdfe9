export type { KeyNames } from './keys.js';
export { keyNames, tagKeys, tagsKey } from './keys.js';
export type { RedisStore, RedisStoreOptions } from './redis-store.js';
export { createRedisStore, StoreTimeoutError } from './redis-store.js';
export { CLAIM, COMPLETE, FAIL, RECOVER, RENEW } from './scripts.js';
