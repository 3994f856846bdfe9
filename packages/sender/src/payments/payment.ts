import type { PaymentSchema } from '@payhook/core';
import type { Static } from 'typebox';

/** A payment as the API answers it and as its events carry it (core's wire shape). */
export type Payment = Static<typeof PaymentSchema>;
