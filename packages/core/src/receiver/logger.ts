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

/**
 * The default logger of a receiver: warnings and errors, one line each on stderr (an authentic
 * event that no handler took, a dead letter, a refused request, a store error); debug and info
 * are dropped. Pass a logger of your own (pino), or `silentLogger` to print nothing.
 *
 * @example
 * ```ts
 * createReceiver({ businessIds, allowedIps }); // warnings on stderr
 * createReceiver({ businessIds, allowedIps, logger: silentLogger }); // quiet, deliberately
 * ```
 */
export const stderrLogger: Logger = {
  debug: noop,
  info: noop,
  warn: (obj, msg) => writeLine('WARN', obj, msg),
  error: (obj, msg) => writeLine('ERROR', obj, msg),
};

function writeLine(level: string, obj: object, msg: string | undefined): void {
  let fields = '';
  try {
    fields = JSON.stringify(obj, (_key, value: unknown) =>
      value instanceof Error
        ? { name: value.name, message: value.message, code: (value as { code?: unknown }).code }
        : value,
    );
  } catch {
    // A field that cannot be written (a cycle, a BigInt) never costs the line itself.
  }
  const line = `${level} ${msg ?? 'payhook'}${fields && fields !== '{}' ? ` ${fields}` : ''}`;
  // Workers and browsers have no process.stderr: their console is where logs go.
  const stderr = (globalThis as { process?: { stderr?: { write(text: string): unknown } } }).process?.stderr;
  if (stderr) stderr.write(`${line}\n`);
  else console.error(line);
}
