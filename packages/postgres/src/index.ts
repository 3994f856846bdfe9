export type { PostgresStoreOptions } from './options.js';
export type { PostgresStore } from './postgres-store.js';
export { createPostgresStore } from './postgres-store.js';
export type { InboxLocation } from './schema.js';
export { inboxMigrationSql, migrateInbox } from './schema.js';
export { PostgresTimeoutError } from './timeout.js';
export { pgTransaction } from './transaction.js';
