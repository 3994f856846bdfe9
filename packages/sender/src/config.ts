import type { Mode } from './db/schema.js';
import { readSecretKeys, type SecretKeys } from './db/secret-box.js';

/** A key from `PAYHOOK_API_KEYS`. */
export interface ConfiguredKey {
  key: string;
  businessId: string;
  mode: Mode;
}

/** The sender's configuration, read from the environment. */
export interface SenderConfig {
  port: number;
  host: string;
  /** PGlite data directory, used when `databaseUrl` is not set. */
  dataDir: string;
  databaseUrl: string | undefined;
  apiKeys: ConfiguredKey[];
  /** Development switch: lets webhook URLs point at private addresses. */
  allowPrivateWebhooks: boolean;
  logLevel: string;
  /** Lifetime of a payment session, in seconds (default one hour). */
  sessionTtlSeconds: number;
  /** Delivery attempts in flight at once in this instance (default 64). */
  deliveryConcurrency: number;
  /**
   * The bounds of each URL's concurrency, which follows how it answers (`UrlConcurrency`): from 4,
   * within `min` (`PAYHOOK_DELIVERY_PER_URL_MIN`, default 1) and `max`
   * (`PAYHOOK_DELIVERY_PER_URL_MAX`, default 32), halved by a failure or an answer slower than
   * `slowMs` (`PAYHOOK_DELIVERY_SLOW_ANSWER_MS`, default 1,000).
   */
  urlConcurrency: { min: number; initial: number; max: number; slowMs: number };
  /** How long a worker's claim on a delivery lasts, in seconds (default 60). */
  deliveryLeaseSeconds: number;
  /**
   * How long a shutdown (SIGTERM, SIGINT) lets delivery attempts in flight finish before it
   * releases them to the queue, in seconds (default 10).
   */
  shutdownGraceSeconds: number;
  /**
   * How often the embedded database (PGlite) is checked for tables to vacuum and analyze, in
   * seconds (default 10; 0 turns it off). PostgreSQL's own autovacuum needs no help.
   */
  maintenanceIntervalSeconds: number;
  /**
   * How long a request waits on the database before it is answered 503 `database_unavailable`: for
   * a pooled connection, or PGlite's thread (`PAYHOOK_DB_ACQUIRE_TIMEOUT_MS`, default 2,000), and
   * on PostgreSQL for one statement (`PAYHOOK_DB_STATEMENT_TIMEOUT_MS`, default 2,500; the
   * connection of a statement unanswered half a second past it is cut).
   */
  databaseTimeouts: { acquireTimeoutMs: number; statementTimeoutMs: number };
  /**
   * How many PostgreSQL connections the API's statements share in each process
   * (`PAYHOOK_DB_POOL_SIZE`, default 10, from 1 to 1000); the delivery worker has 4 more. Not used
   * by PGlite.
   */
  databasePoolSize: number;
  /**
   * Whether delivery attempts carry the W3C `traceparent` of their span (`PAYHOOK_TRACEPARENT=1`;
   * default off, since receivers see it). Needs an OpenTelemetry SDK registered by the application.
   */
  traceparent: boolean;
  /**
   * When a failing webhook endpoint is disabled (`disabled_reason: "failing"`): after every attempt
   * for `afterSeconds` failed (`PAYHOOK_ENDPOINT_DISABLE_AFTER_SECONDS`, default 432,000: 5 days; 0
   * never disables), once at least `minAttempts` were made in that time
   * (`PAYHOOK_ENDPOINT_DISABLE_MIN_ATTEMPTS`, default 10). Warnings come at 50, 75 and 90 % of it.
   */
  endpointDisable: { afterSeconds: number; minAttempts: number };
  /**
   * How long the delivery history is kept, in days (`PAYHOOK_RETENTION_DAYS`, default 30; `0` or
   * `off` keeps it for ever: null). Older events, with their deliveries and attempts, are removed by
   * the retention pass (`delivery/retention.ts`), except those with a delivery still pending.
   */
  retentionDays: number | null;
  /**
   * The keys that seal the signing secrets in the database: `PAYHOOK_SECRET_KEY` (seals; `<key
   * id>:<32 bytes, base64url>`) and `PAYHOOK_SECRET_KEY_PREVIOUS` (comma-separated, open only,
   * during a key rotation). Undefined when unset: PGlite then keeps a key in its data directory,
   * and PostgreSQL refuses to start (`secret_key_missing`).
   */
  secretKeys: SecretKeys | undefined;
}

/** A configuration value that cannot be used; the message names the variable. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/** The levels pino knows: `LOG_LEVEL` takes one of them. */
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

function logLevel(raw: string | undefined): string {
  if (raw === undefined || raw === '') return 'info';
  if (!LOG_LEVELS.includes(raw)) {
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, not ${JSON.stringify(raw)}.`);
  }
  return raw;
}

/** `PAYHOOK_RETENTION_DAYS`: days from 1 to 3650 (default 30), or `0` or `off` for ever (null). */
function retention(raw: string | undefined): number | null {
  if (raw === undefined || raw === '') return 30;
  if (raw === '0' || raw === 'off') return null;
  const days = Number(raw);
  if (!/^\d+$/.test(raw) || days < 1 || days > 3650) {
    throw new ConfigError(
      `PAYHOOK_RETENTION_DAYS must be a number of days from 1 to 3650, or 0 or off to keep everything, not ${JSON.stringify(raw)}.`,
    );
  }
  return days;
}

/**
 * Reads the configuration from environment variables, these names exactly: `PORT` (8080), `HOST`
 * (127.0.0.1), `PAYHOOK_DATA_DIR` (./.payhook), `DATABASE_URL`, `PAYHOOK_API_KEYS`
 * (comma-separated `key:businessId:mode`), `PAYHOOK_ALLOW_PRIVATE_WEBHOOKS` (`1` to allow),
 * `LOG_LEVEL` (info), `PAYHOOK_SESSION_TTL_SECONDS` (3600), `PAYHOOK_DELIVERY_CONCURRENCY` (64),
 * `PAYHOOK_DELIVERY_PER_URL_MIN` (1), `PAYHOOK_DELIVERY_PER_URL_MAX` (32) and
 * `PAYHOOK_DELIVERY_SLOW_ANSWER_MS` (1000: the bounds of each URL's concurrency, and the answer time
 * past which it is halved),
 * `PAYHOOK_DELIVERY_LEASE_SECONDS` (60; more than the 15 s an attempt may take),
 * `PAYHOOK_SHUTDOWN_GRACE_SECONDS` (10, from 0 to 300: how long a shutdown lets delivery attempts in
 * flight finish before releasing them), `PAYHOOK_MAINTENANCE_INTERVAL_SECONDS` (10, 0 to turn off:
 * how often PGlite's tables are checked for a vacuum), `PAYHOOK_DB_ACQUIRE_TIMEOUT_MS` (2000) and
 * `PAYHOOK_DB_STATEMENT_TIMEOUT_MS` (2500: how long a request waits on the database before it is
 * answered 503; the second on PostgreSQL only), `PAYHOOK_DB_POOL_SIZE` (10: the API's PostgreSQL
 * connections in each process),
 * `PAYHOOK_TRACEPARENT` (`1` to send each attempt's trace context to the
 * receiver), `PAYHOOK_ENDPOINT_DISABLE_AFTER_SECONDS` (432000, 0 to never disable: how long every
 * attempt to an endpoint must fail before it is disabled) and `PAYHOOK_ENDPOINT_DISABLE_MIN_ATTEMPTS`
 * (10: the failed attempts that period needs), `PAYHOOK_RETENTION_DAYS` (30, from 1 to 3650, `0`
 * or `off` to keep everything: how long events, deliveries and attempts are kept) and
 * `PAYHOOK_SECRET_KEY` with `PAYHOOK_SECRET_KEY_PREVIOUS` (the keys that seal signing secrets). A
 * bad value is a `ConfigError` naming the variable; a malformed key, a `SecretKeyError`
 * (`secret_key_invalid`) naming its variable.
 *
 * @example
 * ```ts
 * const config = loadConfig(process.env);
 * ```
 */
export function loadConfig(env: Record<string, string | undefined>): SenderConfig {
  const int = (name: string, fallback: number, min: number, max: number) => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min || value > max) {
      throw new ConfigError(`${name} must be an integer from ${min} to ${max}, not ${JSON.stringify(raw)}.`);
    }
    return value;
  };
  const apiKeys: ConfiguredKey[] = [];
  for (const entry of (env.PAYHOOK_API_KEYS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const parts = entry.split(':');
    const [key, businessId, mode] = parts;
    if (parts.length !== 3 || !key || !businessId || (mode !== 'test' && mode !== 'live')) {
      throw new ConfigError(
        `PAYHOOK_API_KEYS entries are key:businessId:mode with mode test or live; ${JSON.stringify(entry.replace(/^[^:]*/, '***'))} is not.`,
      );
    }
    apiKeys.push({ key, businessId, mode });
  }
  const allow = env.PAYHOOK_ALLOW_PRIVATE_WEBHOOKS;
  if (allow !== undefined && allow !== '' && allow !== '0' && allow !== '1') {
    throw new ConfigError(`PAYHOOK_ALLOW_PRIVATE_WEBHOOKS must be 1 or 0, not ${JSON.stringify(allow)}.`);
  }
  const traceparent = env.PAYHOOK_TRACEPARENT;
  if (traceparent !== undefined && traceparent !== '' && traceparent !== '0' && traceparent !== '1') {
    throw new ConfigError(`PAYHOOK_TRACEPARENT must be 1 or 0, not ${JSON.stringify(traceparent)}.`);
  }
  const retentionDays = retention(env.PAYHOOK_RETENTION_DAYS);
  const secretKeys = readSecretKeys(env);
  const perUrlMin = int('PAYHOOK_DELIVERY_PER_URL_MIN', 1, 1, 1000);
  const perUrlMax = int('PAYHOOK_DELIVERY_PER_URL_MAX', 32, 1, 1000);
  if (perUrlMin > perUrlMax) {
    throw new ConfigError(
      `PAYHOOK_DELIVERY_PER_URL_MIN (${perUrlMin}) must not be above PAYHOOK_DELIVERY_PER_URL_MAX (${perUrlMax}).`,
    );
  }
  return {
    port: int('PORT', 8080, 0, 65535),
    host: env.HOST || '127.0.0.1',
    dataDir: env.PAYHOOK_DATA_DIR || './.payhook',
    databaseUrl: env.DATABASE_URL || undefined,
    apiKeys,
    allowPrivateWebhooks: allow === '1',
    logLevel: logLevel(env.LOG_LEVEL),
    sessionTtlSeconds: int('PAYHOOK_SESSION_TTL_SECONDS', 3600, 1, 7 * 24 * 3600),
    deliveryConcurrency: int('PAYHOOK_DELIVERY_CONCURRENCY', 64, 1, 1000),
    urlConcurrency: {
      min: perUrlMin,
      initial: Math.min(perUrlMax, Math.max(perUrlMin, 4)),
      max: perUrlMax,
      slowMs: int('PAYHOOK_DELIVERY_SLOW_ANSWER_MS', 1000, 1, 15_000),
    },
    deliveryLeaseSeconds: int('PAYHOOK_DELIVERY_LEASE_SECONDS', 60, 1, 3600),
    shutdownGraceSeconds: int('PAYHOOK_SHUTDOWN_GRACE_SECONDS', 10, 0, 300),
    maintenanceIntervalSeconds: int('PAYHOOK_MAINTENANCE_INTERVAL_SECONDS', 10, 0, 86_400),
    databaseTimeouts: {
      acquireTimeoutMs: int('PAYHOOK_DB_ACQUIRE_TIMEOUT_MS', 2000, 100, 600_000),
      statementTimeoutMs: int('PAYHOOK_DB_STATEMENT_TIMEOUT_MS', 2500, 100, 3_600_000),
    },
    databasePoolSize: int('PAYHOOK_DB_POOL_SIZE', 10, 1, 1000),
    traceparent: traceparent === '1',
    endpointDisable: {
      afterSeconds: int('PAYHOOK_ENDPOINT_DISABLE_AFTER_SECONDS', 5 * 86_400, 0, 365 * 86_400),
      minAttempts: int('PAYHOOK_ENDPOINT_DISABLE_MIN_ATTEMPTS', 10, 1, 1_000_000),
    },
    retentionDays,
    secretKeys,
  };
}
