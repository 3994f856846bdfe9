import type { Io } from './command.js';
import { painter } from './command.js';

/** How `serve` writes: readable lines for a person, or pino's JSON lines for a machine. */
export type LogFormat = 'pretty' | 'json';

const LEVELS: Record<number, string> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO',
  40: 'WARN',
  50: 'ERROR',
  60: 'FATAL',
};
const SKIPPED = new Set([
  'level',
  'time',
  'msg',
  'pid',
  'hostname',
  'reqId',
  'req',
  'res',
  'responseTime',
  'err',
]);

/** `pretty` when standard output is a terminal, `json` when it is piped (unless asked). */
export function logFormat(asked: string | undefined, io: Io): LogFormat {
  if (asked === 'pretty' || asked === 'json') return asked;
  return io.stdout.isTTY ? 'pretty' : 'json';
}

/**
 * The sender's log stream in the chosen format: pino's JSON lines as they are, or one readable
 * line each. Readable, an API call is one line (`12:34:56 INFO  POST /payment-sessions  201  3 ms`):
 * the server's `incoming request` line is held back and its method and URL go on the `request
 * completed` line of the same request.
 */
export function logStream(format: LogFormat, io: Io): { write(line: string): void } {
  if (format === 'json') return { write: (line) => void io.stdout.write(line) };
  const paint = painter(io);
  /** Each request begun and not yet completed, by its id: `GET /accounts/settings`. */
  const begun = new Map<unknown, { method?: string; url?: string }>();
  return {
    write(line) {
      let entry: Record<string, unknown>;
      try {
        entry = JSON.parse(line) as Record<string, unknown>;
      } catch {
        io.stdout.write(line);
        return;
      }
      const req = entry.req as { method?: string; url?: string } | undefined;
      if (entry.msg === 'incoming request' && req?.method && entry.reqId !== undefined) {
        // A server that never completes requests must not grow this without bound.
        if (begun.size >= 1_000) begun.clear();
        begun.set(entry.reqId, req);
        return;
      }
      if (entry.msg === 'request completed' && begun.has(entry.reqId)) {
        const { msg: _, ...rest } = entry;
        entry = { ...rest, msg: '', req: begun.get(entry.reqId) };
        begun.delete(entry.reqId);
      }
      io.stdout.write(`${formatEntry(entry, paint)}\n`);
    },
  };
}

function formatEntry(entry: Record<string, unknown>, paint: ReturnType<typeof painter>): string {
  const level = LEVELS[entry.level as number] ?? 'INFO';
  const time = new Date(typeof entry.time === 'number' ? entry.time : Date.now()).toTimeString().slice(0, 8);
  const colour =
    level === 'ERROR' || level === 'FATAL' ? paint.red : level === 'WARN' ? paint.yellow : paint.dim;
  const parts = [paint.dim(time), colour(level.padEnd(5))];
  if (entry.msg) parts.push(String(entry.msg));
  const req = entry.req as { method?: string; url?: string } | undefined;
  if (req?.method) parts.push(`${req.method} ${req.url ?? ''}`);
  const res = entry.res as { statusCode?: number } | undefined;
  if (res?.statusCode) parts.push(String(res.statusCode));
  if (typeof entry.responseTime === 'number') parts.push(`${Math.round(entry.responseTime)} ms`);
  const err = entry.err as { message?: string } | undefined;
  if (err?.message) parts.push(paint.red(err.message));
  for (const [key, value] of Object.entries(entry)) {
    if (!SKIPPED.has(key)) parts.push(`${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`);
  }
  return parts.join('  ');
}

/**
 * A line of `serve`'s own, in the chosen format: as given for a person; for a machine, a pino
 * line (level, time, the message without its layout, and `fields`).
 */
export function say(format: LogFormat, io: Io, msg: string, fields: Record<string, unknown> = {}): void {
  if (format === 'json') {
    const line = { level: 30, time: Date.now(), msg: msg.trim().replace(/\s+/g, ' '), ...fields };
    io.stdout.write(`${JSON.stringify(line)}\n`);
  } else io.stdout.write(`${msg}\n`);
}
