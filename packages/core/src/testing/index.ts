import { randomBytes, randomInt, randomUUID } from 'node:crypto';
import { computeChecksum, type SignedPayload } from '../checksum.js';
import type { Payment, PaymentMethod } from '../events/schemas.js';
import type { KnownEventMap, KnownEventName } from '../events/types.js';
import { signWebhook, type WebhookSignatureHeaders } from '../webhook-signature.js';

/**
 * Signs an event the way the service does: `{ event, data, checksum }` with the checksum of
 * `computeChecksum`, keyed by the receiving business's id. For the exact text the service sends,
 * use `encodeSignedEvent` from `@payhook/core`.
 *
 * @example
 * ```ts
 * const payload = signEvent('payment.session.succeeded', createTestPayment({ status: 'settled' }), businessId);
 * verifyChecksum({ payload }, { businessIds: [businessId] }).ok; // true
 * ```
 */
export function signEvent<Event extends string, Data>(
  event: Event,
  data: Data,
  businessId: string,
): SignedPayload<Event, Data> {
  return { event, data, checksum: computeChecksum(event, data, businessId) };
}

/** The payment methods the sender can produce. */
export type TestPaymentMethod = 'card' | 'bank_account' | 'etransfer' | 'wallet' | 'crypto_address' | 'none';

/** Overrides of {@link createTestPayment}: any payment field, and the method to fill in. */
export type TestPaymentOverrides = Partial<Payment> & { method?: TestPaymentMethod };

const FIRST = ['Adaeze', 'Chinedu', 'Funke', 'Emeka', 'Ngozi', 'Tunde'];
const LAST = ['Okafor', 'Adeyemi', 'Balogun', 'Eze', 'Nwosu', ''];
const pick = <T>(list: readonly T[]): T => list[randomInt(list.length)] as T;

function methodFor(method: TestPaymentMethod): { method: PaymentMethod; currency: Payment['currency'] } {
  switch (method) {
    case 'card':
      return {
        currency: 'NGN',
        method: {
          id: randomUUID(),
          type: 'card',
          card_number: '424242******4242',
          expiry_month: 9,
          expiry_year: 2029,
        },
      };
    case 'bank_account':
      return {
        currency: 'NGN',
        method: {
          id: randomUUID(),
          type: 'bank_account',
          account_name: 'Payhook Checkout / Adaeze Okafor',
          account_number: String(randomInt(1_000_000_000, 9_999_999_999)),
          account_type: 'savings',
          bank_name: 'Wema Bank',
        },
      };
    case 'crypto_address':
      return {
        currency: 'USD',
        method: {
          id: randomUUID(),
          type: 'crypto_address',
          address: `0x${randomBytes(20).toString('hex')}`,
          network: 'ethereum',
        },
      };
    case 'etransfer':
      return { currency: 'CAD', method: null };
    case 'wallet':
      return { currency: 'USD', method: null };
    case 'none':
      return { currency: 'NGN', method: null };
  }
}

/**
 * A realistic payment, like the service's samples: a Nigerian customer, an order with a digital
 * and a physical item, an amount above the 100000 minimum, and the payment method object the
 * sender produces for `method` (default `bank_account`; e-transfer and crypto-app payments carry
 * `payment_method: null`, as the spec's capture table says).
 *
 * @example
 * ```ts
 * const payment = createTestPayment({ method: 'card', status: 'settled', amount: 250000 });
 * ```
 */
export function createTestPayment(overrides: TestPaymentOverrides = {}): Payment {
  const { method = 'bank_account', ...fields } = overrides;
  const { method: paymentMethod, currency } = methodFor(method);
  const first = pick(FIRST);
  const last = pick(LAST);
  const orderNumber = randomInt(10_000, 99_999);
  return {
    id: randomUUID(),
    reference: `ref_${randomBytes(8).toString('hex')}`,
    correlation_id: randomUUID(),
    amount: randomInt(100_000, 5_000_000),
    currency,
    description: `Order #${orderNumber}`,
    date: new Date().toISOString(),
    status: 'pending',
    cancellation_reason: null,
    mode: 'test',
    customer: {
      id: randomUUID(),
      first_name: first,
      last_name: last,
      email: `${first.toLowerCase()}.${orderNumber}@example.com`,
      phone_number: `+23480${randomInt(10_000_000, 99_999_999)}`,
      billing_address: {
        line1: '14 Admiralty Way',
        line2: '',
        city: 'Lekki',
        state: 'Lagos',
        zip_code: '106104',
        country: 'NG',
      },
    },
    metadata: {
      order: {
        identifier: `ORD-${orderNumber}`,
        items: [
          { name: 'E-book: Building for payments', type: 'digital' },
          { name: 'Ankara tote bag', type: 'physical' },
        ],
      },
    },
    payment_method: paymentMethod,
    ...fields,
  };
}

const STATUS: Record<KnownEventName, Pick<Payment, 'status' | 'cancellation_reason'>> = {
  'payment.session.created': { status: 'pending', cancellation_reason: null },
  'payment.session.succeeded': { status: 'settled', cancellation_reason: null },
  'payment.session.failed': { status: 'failed', cancellation_reason: 'declined' },
};

/**
 * A signed event of a known name with a fixture payment in the state that event reports
 * (created: pending, succeeded: settled, failed: failed with a cancellation reason).
 *
 * @example
 * ```ts
 * const event = createTestEvent('payment.session.failed', businessId, { method: 'card' });
 * const res = await request(app).post('/webhooks').send(event);
 * ```
 */
export function createTestEvent<Name extends KnownEventName>(
  name: Name,
  businessId: string,
  overrides: TestPaymentOverrides = {},
): KnownEventMap[Name] {
  return signEvent(
    name,
    createTestPayment({ ...STATUS[name], ...overrides }),
    businessId,
  ) as unknown as KnownEventMap[Name];
}

/** Options of {@link createTestRequest}. */
export interface TestRequestOptions {
  /** Signing secrets (`whsec_...`) to sign with; without any, no signature headers. */
  secrets?: readonly string[];
  /** The `webhook-id` (default: a random UUID, as the sender's event ids). */
  id?: string;
  /** The `webhook-timestamp`, in seconds (default now): set it to test the tolerance. */
  timestamp?: number;
}

/** A request as the sender makes it: the exact body and its headers. */
export interface TestRequest {
  body: string;
  headers: { 'content-type': 'application/json' } & Partial<WebhookSignatureHeaders>;
}

/**
 * The request the sender would make for a signed event: its body (the payload as JSON, or the text
 * given as it is) with the checksum inside, and, given secrets, the Standard Webhooks headers.
 *
 * @example
 * ```ts
 * const { body, headers } = createTestRequest(createTestEvent('payment.session.succeeded', businessId), {
 *   secrets: [process.env.WEBHOOK_SECRET!],
 * });
 * await request(app).post('/webhooks').set(headers).send(body).expect(200);
 * ```
 */
export function createTestRequest(payload: unknown, options: TestRequestOptions = {}): TestRequest {
  const body = typeof payload === 'string' ? payload : JSON.stringify(payload);
  const signature =
    options.secrets && options.secrets.length > 0
      ? signWebhook({
          id: options.id ?? randomUUID(),
          body,
          secrets: options.secrets,
          ...(options.timestamp === undefined ? {} : { timestamp: options.timestamp }),
        })
      : {};
  return { body, headers: { 'content-type': 'application/json', ...signature } };
}

export { describeOrderContract } from './order-contract.js';
export {
  describeStoreContract,
  type StoreContractAssertion,
  type StoreContractTestApi,
  type StoreFactory,
} from './store-contract.js';
