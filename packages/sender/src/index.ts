export type { Database, DatabaseOptions } from './db/database.js';
export { appliedMigrations, openDatabase } from './db/database.js';
export { DataDirLockedError } from './db/lock.js';
export type { AccountSettingsTable, ApiKeysTable, Mode, Schema } from './db/schema.js';
export type { AddressClass } from './net/public-address.js';
export { classifyAddress, isPublicAddress } from './net/public-address.js';
export type { CheckWebhookUrlOptions, Resolver, WebhookUrlCheck } from './net/webhook-url.js';
export { checkWebhookUrl, systemResolver } from './net/webhook-url.js';
