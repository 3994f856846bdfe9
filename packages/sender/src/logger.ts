/**
 * The few logger methods the sender's background work uses (the delivery worker, the database's
 * maintenance): pino's, Fastify's `app.log`.
 */
export interface WorkerLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** A logger that drops everything: the default of the worker and of the maintenance. */
export const silentLogger: WorkerLogger = { info() {}, warn() {}, error() {} };
