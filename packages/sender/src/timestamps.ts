/**
 * Every timestamp the API answers: ISO 8601 UTC with microseconds (`2026-01-02T03:04:05.678000Z`),
 * the precision the service's interface gives `expires_at`, so that one format holds everywhere.
 * JavaScript dates carry milliseconds: the last three digits are zeros.
 *
 * @example
 * ```ts
 * isoMicros(new Date('2026-01-02T03:04:05.678Z')); // '2026-01-02T03:04:05.678000Z'
 * ```
 */
export function isoMicros(date: Date | string): string {
  return new Date(date).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}
