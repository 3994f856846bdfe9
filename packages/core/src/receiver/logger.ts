/** The subset of a pino logger payhook writes to (pino, or anything with the same methods). */
export interface Logger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

const noop = () => {};

/**
 * A logger that writes nothing: the default, so a library never prints unasked. Pass pino (or
 * any logger with the same four methods) as `logger` to see what the receiver does.
 *
 * @example
 * ```ts
 * import pino from 'pino';
 * const receiver = createReceiver({ businessIds, allowedIps, logger: pino() });
 * ```
 */
export const silentLogger: Logger = { debug: noop, info: noop, warn: noop, error: noop };
