import { isConnectionLost } from '../db/health.js';

/** The few logger methods the delivery worker uses (pino's, Fastify's `app.log`). */
export interface WorkerLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** A logger that drops everything: the worker's default. */
export const silentLogger: WorkerLogger = { info() {}, warn() {}, error() {} };

/**
 * Logs a failed background step at `error`, unless the database is away: an outage is said once by
 * the database's health (and once when it is back), not by every pass that met it.
 */
export function logFailure(log: WorkerLogger, error: unknown, message: string, fields: object = {}): void {
  if (!isConnectionLost(error)) log.error({ ...fields, err: error }, message);
}
