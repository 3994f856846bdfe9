export type { Principal, StoredKey } from './auth/api-keys.js';
export { authenticate, createApiKey, hashKey, KEY_PREFIX_LENGTH, revokeApiKey } from './auth/api-keys.js';
export type { ConfiguredKey, SenderConfig } from './config.js';
export { ConfigError, loadConfig } from './config.js';
export type { ConnectionRoom } from './db/connection-room.js';
export { connectionRoom, connectionsPerProcess } from './db/connection-room.js';
export type { Database, DatabaseOptions } from './db/database.js';
export { appliedMigrations, openDatabase } from './db/database.js';
export { DataDirLockedError } from './db/lock.js';
export type { AccountSettingsTable, ApiKeysTable, Mode, Schema } from './db/schema.js';
export type { SealReport } from './db/sealed-secrets.js';
export { sealStoredSecrets } from './db/sealed-secrets.js';
export type { SecretBox, SecretKey, SecretKeyErrorCode, SecretKeys } from './db/secret-box.js';
export { createSecretBox, generateSecretKey, readSecretKeys, SecretKeyError } from './db/secret-box.js';
export type { SecretKeyFile } from './db/secret-key-file.js';
export { SECRET_KEY_FILE } from './db/secret-key-file.js';
export type { AttemptErrorCode, AttemptOutcome } from './delivery/attempt-outcome.js';
export { CLI_DESTINATION_PREFIX } from './delivery/destination.js';
export type { AttemptFeed, FedAttempt } from './delivery/feed.js';
export { createAttemptFeed } from './delivery/feed.js';
export type { DeliveryClient, DeliveryClientOptions, DeliveryRequest } from './delivery/http-client.js';
export { createDeliveryClient } from './delivery/http-client.js';
export type { WorkerLogger } from './delivery/logger.js';
export type { AttemptOutcomeLabel, DeliveryMetrics } from './delivery/metrics.js';
export { ATTEMPT_OUTCOMES, createDeliveryMetrics, outcomeLabel } from './delivery/metrics.js';
export { signedPayload, writeEvent } from './delivery/outbox.js';
export type { Retention, RetentionOptions, RetentionReport, RetentionTable } from './delivery/retention.js';
export { createRetention, RETENTION_TABLES, retentionHorizon } from './delivery/retention.js';
export type { RetryAfter } from './delivery/retry-after.js';
export { parseHttpDate, parseRetryAfter, retryAfterTime } from './delivery/retry-after.js';
export type { FailedAttempt } from './delivery/schedule.js';
export {
  DELIVERY_WINDOW_MS,
  JITTER,
  nextAttemptAt,
  RETRY_DELAYS_MS,
  retrySchedule,
} from './delivery/schedule.js';
export type { UrlAnswer, UrlConcurrencyBounds, UrlConcurrencyState } from './delivery/url-concurrency.js';
export { URL_CONCURRENCY_DEFAULTS, UrlConcurrency } from './delivery/url-concurrency.js';
export type { DeliveryWorker, DeliveryWorkerOptions } from './delivery/worker.js';
export { createDeliveryWorker } from './delivery/worker.js';
export type { ApiErrorCode, ApiErrorOptions, FieldError } from './errors.js';
export { API_ERROR_STATUS, ApiError } from './errors.js';
export type { AppOptions } from './http/app.js';
export { buildApp } from './http/app.js';
export type { ListenerAttemptsReport } from './http/listen.js';
export { LISTEN_RESUME_WINDOW_SECONDS, MAX_LISTENERS_PER_BUSINESS } from './http/listen.js';
export type { WebhookEndpointView } from './http/webhook-endpoint-view.js';
export type { ListenerAttempt } from './listen/record.js';
export type { AddressClass } from './net/public-address.js';
export { classifyAddress, isPublicAddress } from './net/public-address.js';
export type { CheckWebhookUrlOptions, Resolver, WebhookUrlCheck } from './net/webhook-url.js';
export { checkWebhookUrl, systemResolver } from './net/webhook-url.js';
export type { SampleSessionOptions } from './payments/sample-session.js';
export { SAMPLE_CURRENCY, sampleSession } from './payments/sample-session.js';
export type { SenderService, StartSenderOptions } from './service.js';
export { startSender } from './service.js';
export type { EndpointSecretView, SignatureScheme } from './signing/endpoint-secrets.js';
export type { SecretValidity } from './signing/secret-set.js';
export type { SecretOwner, SigningSecretView } from './signing/secrets.js';
export { listSigningSecrets } from './signing/secrets.js';
export { expireSessions } from './sweeper.js';
