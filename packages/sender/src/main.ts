// The sender as a process: configuration from the environment, then `startSender` (storage, HTTP,
// the delivery worker, the expiry sweeper) until SIGTERM or SIGINT.

import { ConfigError, loadConfig } from './config.js';
import { DataDirLockedError } from './db/lock.js';
import { SecretKeyError } from './db/secret-box.js';
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
  const refused = error instanceof ConfigError || error instanceof SecretKeyError;
  const message =
    error instanceof SecretKeyError
      ? `${error.message} (${error.code})`
      : refused || error instanceof DataDirLockedError
        ? (error as Error).message
        : String((error as Error).stack ?? error);
  process.stderr.write(`payhook sender: ${message}\n`);
  process.exit(refused ? 2 : 1);
});
