export type { PostgresStoreOptions } from './options.js';
export type { PostgresStore } from './postgres-store.js';
export { createPostgresStore } from './postgres-store.js';
export type { InboxLocation } from './schema.js';
export { inboxMigrationSql, migrateInbox } from './schema.js';
export { PostgresTimeoutError } from './timeout.js';
export type { TransactionConnection, TransactionPool } from './transaction.js';
export { pgTransaction, transactionPool } from './transaction.js';
