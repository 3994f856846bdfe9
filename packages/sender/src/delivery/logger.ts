import { isConnectionLost } from '../db/health.js';
import type { WorkerLogger } from '../logger.js';

export { silentLogger, type WorkerLogger } from '../logger.js';

/**
 * Logs a failed background step at `error`, unless the database is away: an outage is said once by
 * the database's health (and once when it is back), not by every pass that met it.
 */
export function logFailure(log: WorkerLogger, error: unknown, message: string, fields: object = {}): void {
  if (!isConnectionLost(error)) log.error({ ...fields, err: error }, message);
}
