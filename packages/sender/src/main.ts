// The sender as a process: configuration from the environment, storage, HTTP, the delivery
// worker, graceful shutdown.

import { ConfigError, loadConfig } from './config.js';
import { openDatabase } from './db/database.js';
import { createDeliveryMetrics } from './delivery/metrics.js';
import { createDeliveryWorker } from './delivery/worker.js';
import { buildApp } from './http/app.js';
import { expireSessions } from './sweeper.js';

async function main(): Promise<void> {
  const config = loadConfig(process.env);
  const database = await openDatabase(
    config.databaseUrl ? { url: config.databaseUrl } : { dataDir: config.dataDir },
  );
  const metrics = createDeliveryMetrics(database);
  const app = await buildApp({ database, config, metrics });
  const worker = createDeliveryWorker({
    database,
    metrics,
    allowPrivate: config.allowPrivateWebhooks,
    concurrency: config.deliveryConcurrency,
    leaseMs: config.deliveryLeaseSeconds * 1000,
    logger: app.log,
  });
  // Sessions past their expires_at fail (with their event) within a few seconds.
  const sweeper = setInterval(() => {
    expireSessions(database).catch((error: unknown) =>
      app.log.error({ err: error }, 'expiring sessions failed'),
    );
  }, 5000);
  sweeper.unref();
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.log.info({ signal }, 'shutting down');
    clearInterval(sweeper);
    // No new requests, then the attempts in flight finish or go back to the queue.
    await app.close();
    await worker.stop();
    await database.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
  await app.listen({ port: config.port, host: config.host });
  await worker.start();
}

main().catch((error: unknown) => {
  const message =
    error instanceof ConfigError || (error as Error).name === 'DataDirLockedError'
      ? (error as Error).message
      : String((error as Error).stack ?? error);
  process.stderr.write(`payhook sender: ${message}\n`);
  process.exit(error instanceof ConfigError ? 2 : 1);
});
