/** The few logger methods the delivery worker uses (pino's, Fastify's `app.log`). */
export interface WorkerLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** A logger that drops everything: the worker's default. */
export const silentLogger: WorkerLogger = { info() {}, warn() {}, error() {} };
