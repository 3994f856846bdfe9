import type { PaymentSchema } from '@payhook/core';
import type { Static } from 'typebox';

/** A payment as the API answers it and as its events carry it (core's wire shape). */
export type Payment = Static<typeof PaymentSchema>;

/** ISO 8601 UTC with microseconds, as the spec writes `expires_at`. */
export function isoMicros(date: Date): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}
