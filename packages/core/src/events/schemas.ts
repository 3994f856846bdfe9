import { type Static, type TProperties, Type } from 'typebox';

// The wire shapes of the service (docs/service-interface.md, "Resources"),
// defined once: the receiver validates events with them and the reference sender builds its route
// schemas and OpenAPI document from them. Objects accept extra properties everywhere, because the
// service may add fields and a receiver must not refuse an authentic event for that.
const open = { additionalProperties: true } as const;

/**
 * An integer that a JavaScript number holds exactly (|n| <= 2^53 - 1). A larger integer in a body
 * has already lost digits once parsed, and `1E400` parses to Infinity: neither is a valid amount.
 */
const safeInteger = (options: { minimum?: number; description?: string } = {}) =>
  Type.Integer({ minimum: -Number.MAX_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER, ...options });

/** A postal address: `line1`, `line2` (may be empty), `city`, `state`, `zip_code`, `country` (ISO 3166-1 alpha-2). */
export const AddressSchema = Type.Object(
  {
    line1: Type.String(),
    line2: Type.String(),
    city: Type.String(),
    state: Type.String(),
    zip_code: Type.String(),
    country: Type.String({ minLength: 2, maxLength: 2, description: 'Two-letter country code.' }),
  },
  { ...open, title: 'Address' },
);

/** The fields of a customer that a caller supplies (no id). */
export const CustomerInputSchema = Type.Object(
  {
    first_name: Type.String(),
    last_name: Type.String({ description: 'May be an empty string.' }),
    email: Type.String(),
    phone_number: Type.String({ description: 'International format with a leading plus sign.' }),
    billing_address: AddressSchema,
  },
  { ...open, title: 'CustomerInput' },
);

/** A customer as the service returns it, inside payments too (where it may carry `business_id`). */
export const CustomerSchema = Type.Object(
  {
    id: Type.String({ description: 'UUID assigned by the service.' }),
    first_name: Type.String(),
    last_name: Type.String(),
    email: Type.String(),
    phone_number: Type.String(),
    billing_address: AddressSchema,
    business_id: Type.Optional(Type.String()),
  },
  { ...open, title: 'Customer' },
);

/** One item of an order: `name` and `type` (observed: digital, physical). */
export const OrderItemSchema = Type.Object(
  { name: Type.String(), type: Type.String() },
  { ...open, title: 'OrderItem' },
);

/** Payment metadata: the order it pays for. */
export const MetadataSchema = Type.Object(
  {
    order: Type.Object(
      { identifier: Type.String(), items: Type.Array(OrderItemSchema) },
      { ...open, title: 'Order' },
    ),
  },
  { ...open, title: 'Metadata' },
);

/** A payment method of a type payhook knows the shape of: its `id`, its `type`, then that type's fields. */
const knownPaymentMethod = <Kind extends string, Fields extends TProperties>(
  type: Kind,
  fields: Fields,
  title: string,
) => Type.Object({ id: Type.String(), type: Type.Literal(type), ...fields }, { ...open, title });

/** A card in a payment: masked number and expiry. */
export const CardPaymentMethodSchema = knownPaymentMethod(
  'card',
  {
    card_number: Type.String({ description: 'Masked, such as 424242******4242.' }),
    expiry_month: safeInteger(),
    expiry_year: safeInteger(),
  },
  'CardPaymentMethod',
);

/** The bank account a customer pays into (bank transfer). */
export const BankAccountPaymentMethodSchema = knownPaymentMethod(
  'bank_account',
  {
    account_name: Type.String(),
    account_number: Type.String(),
    account_type: Type.String({ description: 'Observed: savings.' }),
    bank_name: Type.String(),
  },
  'BankAccountPaymentMethod',
);

/** A stablecoin deposit address (a shape the original interface did not show; decided by the sender). */
export const CryptoAddressPaymentMethodSchema = knownPaymentMethod(
  'crypto_address',
  { address: Type.String(), network: Type.String() },
  'CryptoAddressPaymentMethod',
);

/** The method types payhook knows the shape of. */
export const KNOWN_PAYMENT_METHOD_TYPES = ['card', 'bank_account', 'crypto_address'] as const;

/** A payment method of a type payhook does not know yet: its fields are kept as sent. */
export const OtherPaymentMethodSchema = Type.Object(
  { type: Type.String({ not: { enum: [...KNOWN_PAYMENT_METHOD_TYPES] } }) },
  { ...open, title: 'OtherPaymentMethod' },
);

/** The payment method of a payment: a known shape, another type with its fields, or null. */
export const PaymentMethodSchema = Type.Union(
  [
    CardPaymentMethodSchema,
    BankAccountPaymentMethodSchema,
    CryptoAddressPaymentMethodSchema,
    OtherPaymentMethodSchema,
    Type.Null(),
  ],
  { title: 'PaymentMethod' },
);

/** Payment status values. */
export const PaymentStatusSchema = Type.Union(
  [Type.Literal('pending'), Type.Literal('captured'), Type.Literal('settled'), Type.Literal('failed')],
  { title: 'PaymentStatus' },
);

/** Currencies the service collects. */
export const CurrencySchema = Type.Union([Type.Literal('NGN'), Type.Literal('USD'), Type.Literal('CAD')], {
  title: 'Currency',
});

/**
 * A payment, as `GET /payments/{id}` returns it and as events carry it in `data`. Like every schema
 * here it is plain JSON Schema (TypeBox), usable as a Fastify route schema or in an OpenAPI document.
 *
 * @example
 * ```ts
 * import { Compile } from 'typebox/compile';
 * const validate = Compile(PaymentSchema);
 * if (!validate.Check(body)) console.log(validate.Errors(body));
 * ```
 */
export const PaymentSchema = Type.Object(
  {
    id: Type.String({ description: 'Payment session id (UUID).' }),
    reference: Type.String(),
    correlation_id: Type.String(),
    amount: safeInteger({
      minimum: 0,
      description:
        'Smallest currency unit; for the crypto-app method, the USD value. A safe integer (at most 2^53 - 1).',
    }),
    currency: CurrencySchema,
    description: Type.String(),
    date: Type.String({ description: 'ISO 8601 UTC timestamp.' }),
    status: PaymentStatusSchema,
    cancellation_reason: Type.Union([Type.String(), Type.Null()]),
    mode: Type.Union([Type.Literal('live'), Type.Literal('test')]),
    customer: CustomerSchema,
    metadata: MetadataSchema,
    payment_method: PaymentMethodSchema,
  },
  { ...open, title: 'Payment' },
);

/** A postal address ({@link AddressSchema}): `country` is ISO 3166-1 alpha-2, `line2` may be empty. */
export type Address = Static<typeof AddressSchema>;
/** The fields of a customer that a caller supplies, without an id ({@link CustomerInputSchema}). */
export type CustomerInput = Static<typeof CustomerInputSchema>;
/**
 * A customer as the service returns it and as a payment carries it ({@link CustomerSchema}).
 *
 * @example
 * ```ts
 * receiver.on('payment.session.succeeded', (event) => {
 *   const customer: Customer = event.data.customer;
 *   console.log(customer.email, customer.billing_address.country);
 * });
 * ```
 */
export type Customer = Static<typeof CustomerSchema>;
/** One item of a payment's order: `name` and `type` ({@link OrderItemSchema}). */
export type OrderItem = Static<typeof OrderItemSchema>;
/**
 * A payment's metadata: the order it pays for ({@link MetadataSchema}).
 *
 * @example
 * ```ts
 * const { identifier, items }: Metadata['order'] = event.data.metadata.order;
 * ```
 */
export type Metadata = Static<typeof MetadataSchema>;
/** A card in a payment, `type: 'card'`: its masked number and expiry ({@link CardPaymentMethodSchema}). */
export type CardPaymentMethod = Static<typeof CardPaymentMethodSchema>;
/** The bank account a customer pays into, `type: 'bank_account'` ({@link BankAccountPaymentMethodSchema}). */
export type BankAccountPaymentMethod = Static<typeof BankAccountPaymentMethodSchema>;
/** A stablecoin deposit address, `type: 'crypto_address'` ({@link CryptoAddressPaymentMethodSchema}). */
export type CryptoAddressPaymentMethod = Static<typeof CryptoAddressPaymentMethodSchema>;
/** A payment method of another type; its fields are there, untyped. */
export interface OtherPaymentMethod {
  type: string;
  [field: string]: unknown;
}
/**
 * The payment method of a payment. Narrow known shapes with {@link isKnownPaymentMethod} or by
 * `type` after it.
 */
export type PaymentMethod =
  | CardPaymentMethod
  | BankAccountPaymentMethod
  | CryptoAddressPaymentMethod
  | OtherPaymentMethod
  | null;
/** The known payment method shapes. */
export type KnownPaymentMethod = CardPaymentMethod | BankAccountPaymentMethod | CryptoAddressPaymentMethod;
/**
 * A payment's status: `pending`, `captured` (funds received), `settled` or `failed`.
 *
 * @example
 * ```ts
 * const done = (status: PaymentStatus) => status === 'settled' || status === 'failed';
 * ```
 */
export type PaymentStatus = Static<typeof PaymentStatusSchema>;
/** A currency the service collects: `NGN`, `USD` or `CAD`. */
export type Currency = Static<typeof CurrencySchema>;
/** A payment, as events carry it. */
export type Payment = Omit<Static<typeof PaymentSchema>, 'payment_method'> & {
  payment_method: PaymentMethod;
};

/**
 * True if a payment method has one of the shapes payhook knows; `switch (method.type)` then
 * narrows to the card, bank account or crypto address.
 *
 * @example
 * ```ts
 * const method = event.data.payment_method;
 * if (isKnownPaymentMethod(method) && method.type === 'card') console.log(method.card_number);
 * ```
 */
export function isKnownPaymentMethod(method: PaymentMethod): method is KnownPaymentMethod {
  return method !== null && (KNOWN_PAYMENT_METHOD_TYPES as readonly string[]).includes(method.type);
}
