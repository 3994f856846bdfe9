import type { FastifyInstance } from 'fastify';
import type { SenderConfig } from './config.js';
import { checkAutovacuum } from './db/autovacuum.js';
import { type Database, openDatabase } from './db/database.js';
import { createMaintenance, type Maintenance } from './db/maintenance.js';
import { type AttemptFeed, createAttemptFeed } from './delivery/feed.js';
import { logFailure } from './delivery/logger.js';
import { createDeliveryMetrics, type DeliveryMetrics } from './delivery/metrics.js';
import { createRetention, type Retention, type RetentionOptions } from './delivery/retention.js';
import { registerStorageMetrics } from './delivery/storage-metrics.js';
import { UrlConcurrency } from './delivery/url-concurrency.js';
import { createDeliveryWorker, type DeliveryWorker, type DeliveryWorkerOptions } from './delivery/worker.js';
import { checkFailingEndpoints } from './endpoints/health.js';
import { buildApp } from './http/app.js';
import type { Resolver } from './net/webhook-url.js';
import { ensureSigningSecret } from './signing/secrets.js';
import { expireSessions } from './sweeper.js';

/** Options of {@link startSender}. */
export interface StartSenderOptions {
  config: SenderConfig;
  /** An open database (default: opened from the configuration, and closed by `close()`). */
  database?: Database;
  /** Fastify's logger option (default: pino at `config.logLevel`, on stdout; `stream` writes elsewhere). */
  logger?: boolean | { level: string; stream?: { write(line: string): void } };
  /** Resolves webhook host names (injectable for tests). */
  resolve?: Resolver;
  /** More options of the delivery worker (the clock, the client, limits). */
  worker?: Partial<Omit<DeliveryWorkerOptions, 'database' | 'metrics'>>;
  /** More options of the retention passes (their timing, their batch); their clock is the worker's. */
  retention?: Pick<RetentionOptions, 'intervalMs' | 'firstDelayMs' | 'batchSize'>;
}

/**
 * A running sender: the HTTP service, its delivery worker, the expiry sweeper, the retention of
 * its history and, on PGlite, the database's maintenance.
 */
export interface SenderService {
  /** The address it listens on, such as `http://127.0.0.1:8080`. */
  url: string;
  app: FastifyInstance;
  database: Database;
  worker: DeliveryWorker;
  metrics: DeliveryMetrics;
  /** The attempts its worker records, as they are committed (the dashboard's live view reads it). */
  feed: AttemptFeed;
  /** Vacuums and analyzes PGlite's tables every `config.maintenanceIntervalSeconds` (see `createMaintenance`). */
  maintenance: Maintenance;
  /** Removes the history older than `config.retentionDays`, once an hour (see `createRetention`). */
  retention: Retention;
  /** Stops taking requests, finishes or releases the deliveries in flight, and closes storage. */
  close(): Promise<void>;
}

/**
 * The listening socket's queue of connections the process has not accepted yet (the kernel caps it
 * at `net.core.somaxconn`). With Node's default of 511, 4,000 clients connecting at once to a busy
 * sender overflowed it, and the kernel reset 237 of their connections; with 4,096, none
 * (docs/decisions.md, "The listening socket's backlog is 4,096").
 */
export const LISTEN_BACKLOG = 4096;

/**
 * Starts the whole sender in this process: storage (PGlite, or PostgreSQL when
 * `config.databaseUrl` is set), the HTTP API on `config.host:config.port`, the delivery worker and
 * the sweeper that expires unpaid sessions and warns about, then disables, failing webhook
 * endpoints (`config.endpointDisable`), and the hourly removal of the history older than
 * `config.retentionDays`. On PostgreSQL it warns at start when the server's autovacuum is off.
 *
 * @example
 * ```ts
 * const sender = await startSender({ config: loadConfig(process.env) });
 * process.on('SIGTERM', () => sender.close());
 * ```
 */
export async function startSender(options: StartSenderOptions): Promise<SenderService> {
  const { config } = options;
  // The configuration's sealing keys; without them, the process environment's (openDatabase).
  const keys = config.secretKeys ? { secretKeys: config.secretKeys } : {};
  const database =
    options.database ??
    (await openDatabase(
      config.databaseUrl
        ? { url: config.databaseUrl, ...config.databaseTimeouts, poolSize: config.databasePoolSize, ...keys }
        : { dataDir: config.dataDir, acquireTimeoutMs: config.databaseTimeouts.acquireTimeoutMs, ...keys },
    ));
  const ownDatabase = options.database === undefined;
  try {
    // Every business of the configuration has its signing secret from the start.
    for (const { businessId, mode } of config.apiKeys) {
      await ensureSigningSecret(database.db, { businessId, mode });
    }
    // Each URL's concurrency, learnt by the worker, shown on /metrics and the dashboard.
    const urlConcurrency = UrlConcurrency.from(options.worker?.perUrlConcurrency ?? config.urlConcurrency);
    const metrics = createDeliveryMetrics(database, undefined, urlConcurrency);
    const feed = createAttemptFeed();
    const app = await buildApp({
      database,
      config,
      metrics,
      feed,
      urlConcurrency,
      ...(options.worker?.now ? { now: options.worker.now } : {}),
      ...(options.resolve ? { resolve: options.resolve } : {}),
      ...(options.logger !== undefined ? { logger: options.logger } : {}),
    });
    const worker = createDeliveryWorker({
      allowPrivate: config.allowPrivateWebhooks,
      concurrency: config.deliveryConcurrency,
      leaseMs: config.deliveryLeaseSeconds * 1000,
      logger: app.log,
      ...(options.resolve ? { resolve: options.resolve } : {}),
      shutdownGraceMs: config.shutdownGraceSeconds * 1000,
      traceparent: config.traceparent,
      ...options.worker,
      perUrlConcurrency: urlConcurrency,
      database,
      metrics,
      feed,
    });
    // On PostgreSQL, one warning at start when the server's autovacuum does not run.
    await checkAutovacuum(database, app.log);
    // Sessions past their expires_at fail (with their event) within a few seconds; endpoints that
    // keep failing are warned about, then disabled (on the worker's clock).
    const now = options.worker?.now ?? (() => new Date());
    const disableRule = {
      afterMs: config.endpointDisable.afterSeconds * 1000,
      minAttempts: config.endpointDisable.minAttempts,
    };
    const sweeper = setInterval(() => {
      if (database.health.state === 'down') return;
      expireSessions(database).catch((error: unknown) =>
        logFailure(app.log, error, 'expiring sessions failed'),
      );
      checkFailingEndpoints(database, disableRule, now(), app.log).catch((error: unknown) =>
        logFailure(app.log, error, 'checking failing webhook endpoints failed'),
      );
    }, 5000);
    // An outage is said once when it starts and once when it ends, not by every request it fails.
    const stopReporting = database.health.onChange((change) => {
      if (change.state === 'down')
        app.log.error(
          { reason: change.reason },
          'database unavailable: the API answers 503 database_unavailable and deliveries wait until it is back',
        );
      else app.log.info({ downForMs: change.downForMs }, 'database is back: the API and deliveries go on');
    });
    sweeper.unref();
    const maintenance = createMaintenance({
      database,
      intervalMs: config.maintenanceIntervalSeconds * 1000,
      logger: app.log,
    });
    // The history past its retention goes in short batches, one pass an hour, on the worker's clock.
    const storageMetrics = registerStorageMetrics(metrics.registry, database);
    const retention = createRetention({
      database,
      days: config.retentionDays,
      logger: app.log,
      now,
      onPass: storageMetrics.observePass,
      ...options.retention,
    });
    const keyFile = database.secretKeyFile;
    if (keyFile) {
      app.log.info(
        { secretKeyFile: keyFile.path, created: keyFile.created },
        `signing secrets are sealed with the key in ${keyFile.path}${keyFile.created ? ' (made now, mode 0600)' : ''}: set PAYHOOK_SECRET_KEY to keep the key outside the data directory`,
      );
    }
    const url = await app.listen({ port: config.port, host: config.host, backlog: LISTEN_BACKLOG });
    await worker.start();
    maintenance.start();
    retention.start();
    let closing: Promise<void> | undefined;
    return {
      url,
      app,
      database,
      worker,
      metrics,
      feed,
      maintenance,
      retention,
      close() {
        closing ??= (async () => {
          clearInterval(sweeper);
          stopReporting();
          // No pass starts from now on; one running finishes its statement while the rest stops.
          const maintained = maintenance.stop();
          // A retention pass ends after the batch it is running.
          const retained = retention.stop();
          // No new requests, then the attempts in flight finish or go back to the queue.
          await app.close();
          await worker.stop();
          await maintained;
          await retained;
          if (ownDatabase) await database.close();
        })();
        return closing;
      },
    };
  } catch (error) {
    if (ownDatabase) await database.close();
    throw error;
  }
}
