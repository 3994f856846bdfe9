// The sender as a process: configuration from the environment, then `startSender` (storage, HTTP,
// the delivery worker, the expiry sweeper) until SIGTERM or SIGINT.

import { ConfigError, loadConfig } from './config.js';
import { DataDirLockedError } from './db/lock.js';
import { startSender } from './service.js';

async function main(): Promise<void> {
  const config = loadConfig(process.env);
  const sender = await startSender({ config });
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    sender.app.log.info({ signal }, 'shutting down');
    await sender.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

main().catch((error: unknown) => {
  const message =
    error instanceof ConfigError || error instanceof DataDirLockedError
      ? error.message
      : String((error as Error).stack ?? error);
  process.stderr.write(`payhook sender: ${message}\n`);
  process.exit(error instanceof ConfigError ? 2 : 1);
});
