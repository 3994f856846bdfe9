// A realistic payment session request, for the places that make one to show the sandbox at work:
// the dashboard's payments page and `payhook trigger --api-key`.
import { randomUUID } from 'node:crypto';

/** The currency a sample session of each payment method is made in (e-transfer CAD, the crypto methods USD). */
export const SAMPLE_CURRENCY: Readonly<Record<string, string>> = {
  bank_account: 'NGN',
  card: 'NGN',
  etransfer: 'CAD',
  wallet: 'USD',
  crypto_address: 'USD',
};

/** What a sample session is made of; each has a default. */
export interface SampleSessionOptions {
  /** The payment method (default `bank_account`); its currency is {@link SAMPLE_CURRENCY}'s. */
  method?: string;
  /** In the currency's smallest unit (default 150000). */
  amount?: number;
  /** Default `Test order` (also for an empty one). */
  description?: string | undefined;
  /** What the order's identifier starts with, naming who made it (default `sample`). */
  source?: string;
}

/**
 * A `POST /payment-sessions` body: a customer in Lagos, one physical item, the method asked for.
 *
 * @example
 * ```ts
 * await api.post('/payment-sessions', sampleSession({ method: 'wallet', source: 'trigger' }));
 * ```
 */
export function sampleSession(options: SampleSessionOptions = {}) {
  const method = options.method ?? 'bank_account';
  return {
    customer: {
      first_name: 'Ada',
      last_name: 'Obi',
      email: 'ada@example.com',
      phone_number: '+2348012345678',
      billing_address: {
        line1: '1 Marina',
        line2: '',
        city: 'Lagos',
        state: 'Lagos',
        zip_code: '101001',
        country: 'NG',
      },
    },
    description: options.description || 'Test order',
    currency: SAMPLE_CURRENCY[method] ?? 'NGN',
    amount: options.amount ?? 150_000,
    payment_method: { type: method },
    metadata: {
      order: {
        identifier: `${options.source ?? 'sample'}-${randomUUID().slice(0, 8)}`,
        items: [{ name: 'Test item', type: 'physical' }],
      },
    },
  };
}
