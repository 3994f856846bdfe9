import { randomBytes, randomUUID } from 'node:crypto';
import { CustomerInputSchema, MetadataSchema, PaymentSchema } from '@payhook/core';
import type { FastifyPluginAsync } from 'fastify';
import type { OperationNodeSource } from 'kysely';
import { type Static, Type } from 'typebox';
import { Compile } from 'typebox/compile';
import type { SenderConfig } from '../config.js';
import type { Database } from '../db/database.js';
import { eventWrite } from '../delivery/outbox.js';
import { ApiError, type FieldError } from '../errors.js';
import { UUID } from '../ids.js';
import type { Payment } from '../payments/payment.js';
import { isoMicros } from '../timestamps.js';
import { emailProblem } from './email.js';
import { responseStored, responseUpdate } from './idempotency.js';
import { listPage, listSchema, microsColumn, PageQuery } from './pagination.js';

/** Payment method types accepted on creation; the spelling `crypto address` is normalized. */
const METHOD_TYPES = ['card', 'bank_account', 'etransfer', 'wallet', 'crypto_address'] as const;
const CURRENCIES = ['NGN', 'USD', 'CAD'] as const;
const STATUSES = ['pending', 'captured', 'settled', 'failed'] as const;
const MINIMUM_AMOUNT = 100_000;
/**
 * The largest amount a session takes, in the smallest unit: 2^53 - 1, the largest integer a JSON
 * number carries exactly through every JavaScript client (and the receivers' typed events).
 */
export const MAXIMUM_AMOUNT = Number.MAX_SAFE_INTEGER;

const validCustomer = Compile(CustomerInputSchema);
const validMetadata = Compile(MetadataSchema);

/** The session response envelope of the spec, shared by create, capture and list. */
export const SessionEnvelopeSchema = Type.Object(
  {
    auth_type: Type.Union([Type.String(), Type.Null()]),
    expires_at: Type.String(),
    links: Type.Record(Type.String(), Type.String()),
    message: Type.String(),
    payment: PaymentSchema,
    status: Type.String(),
  },
  { title: 'PaymentSessionEnvelope' },
);

function issues(
  validator: { Errors(v: unknown): { instancePath: string; message: string; params: unknown }[] },
  value: unknown,
  prefix: string,
): FieldError[] {
  return validator.Errors(value).map((e) => {
    const missing = (e.params as { requiredProperties?: string[] }).requiredProperties?.[0];
    const path = [prefix, ...e.instancePath.split('/').filter(Boolean), ...(missing ? [missing] : [])].join(
      '.',
    );
    return { field: path, message: e.message };
  });
}

/** Reads and checks a session request; every problem is a field of one 422. */
function readSessionRequest(body: Record<string, unknown>) {
  const details: FieldError[] = [];
  const {
    description,
    currency,
    amount,
    metadata,
    customer,
    customer_id,
    payment_method,
    direction,
    reference,
  } = body;
  if (typeof description !== 'string' || description.length === 0)
    details.push({ field: 'description', message: 'is required (a string)' });
  if (!CURRENCIES.includes(currency as never))
    details.push({ field: 'currency', message: 'must be NGN, USD or CAD' });
  // A safe integer only: 1e308 is an integer to JavaScript, but no amount, and is not held exactly.
  if (typeof amount !== 'number' || !Number.isSafeInteger(amount))
    details.push({
      field: 'amount',
      message: `is required (an integer in the smallest unit, at most ${MAXIMUM_AMOUNT})`,
    });
  else if (amount < MINIMUM_AMOUNT)
    details.push({ field: 'amount', message: `must be at least ${MINIMUM_AMOUNT}` });
  else if (amount > MAXIMUM_AMOUNT)
    details.push({ field: 'amount', message: `must be at most ${MAXIMUM_AMOUNT}` });
  if (metadata === undefined) details.push({ field: 'metadata', message: 'is required' });
  else if (!validMetadata.Check(metadata)) details.push(...issues(validMetadata, metadata, 'metadata'));
  if ((customer === undefined) === (customer_id === undefined)) {
    details.push({ field: 'customer', message: 'give exactly one of customer and customer_id' });
  } else if (customer !== undefined && !validCustomer.Check(customer)) {
    details.push(...issues(validCustomer, customer, 'customer'));
  } else if (customer !== undefined) {
    const problem = emailProblem((customer as { email: string }).email);
    if (problem) details.push({ field: 'customer.email', message: problem });
  } else if (customer_id !== undefined && (typeof customer_id !== 'string' || !UUID.test(customer_id))) {
    details.push({ field: 'customer_id', message: 'must be the id of a customer' });
  }
  let methodType: string | null = null;
  if (payment_method !== undefined && payment_method !== null) {
    const type = (payment_method as { type?: unknown }).type;
    methodType = type === 'crypto address' ? 'crypto_address' : (type as string);
    if (typeof payment_method !== 'object' || !METHOD_TYPES.includes(methodType as never)) {
      details.push({ field: 'payment_method.type', message: `must be one of ${METHOD_TYPES.join(', ')}` });
    }
  }
  if (direction !== undefined && direction !== 'incoming')
    details.push({ field: 'direction', message: 'must be "incoming"' });
  if (
    reference !== undefined &&
    (typeof reference !== 'string' || reference.length === 0 || reference.length > 200)
  ) {
    details.push({ field: 'reference', message: 'must be a string of 1 to 200 characters' });
  }
  if (details.length > 0)
    throw new ApiError('validation_failed', 'The payment session has invalid fields.', { details: details });
  return {
    description: description as string,
    currency: currency as Payment['currency'],
    amount: amount as number,
    metadata: metadata as Payment['metadata'],
    customer: customer as Static<typeof CustomerInputSchema> | undefined,
    customerId: customer_id as string | undefined,
    methodType,
    reference: (reference as string | undefined) ?? `ref_${randomBytes(12).toString('hex')}`,
  };
}

const MESSAGES: Record<string, string> = {
  pending: 'Payment session created; waiting for payment.',
  captured: 'Payment received; waiting for payment resolution.',
  settled: 'Payment successful.',
  failed: 'Payment failed.',
};

/**
 * The session response envelope of a payment, with what its capture attached: a bank transfer
 * captured and waiting for the money says so (the spec's waiting-for-payment-resolution text).
 */
export function envelope(
  payment: Payment,
  expiresAt: Date,
  capture: { auth_type?: string | null; links?: Record<string, string> } = {},
) {
  const awaitingTransfer = payment.status === 'pending' && payment.payment_method?.type === 'bank_account';
  return {
    auth_type: capture.auth_type ?? null,
    expires_at: isoMicros(expiresAt),
    links: capture.links ?? {},
    message: (awaitingTransfer ? MESSAGES.captured : MESSAGES[payment.status]) ?? '',
    payment,
    status: payment.status,
  };
}

/** `POST /payment-sessions`, `GET /payments`, `GET /payments/{id}`. */
export const paymentRoutes: FastifyPluginAsync<{ database: Database; config: SenderConfig }> = async (
  app,
  { database, config },
) => {
  const { db } = database;

  app.post<{ Body: Record<string, unknown> }>(
    '/payment-sessions',
    {
      schema: {
        summary: 'Create a payment session',
        operationId: 'createPaymentSession',
        description: `\`amount\` is an integer in the smallest unit, from ${MINIMUM_AMOUNT} to ${MAXIMUM_AMOUNT} (2^53 - 1); anything else, 1e308 or 9007199254740993 included, is 422. A customer's \`email\` has one @ and a domain with a dot, and no whitespace or control characters.`,
        body: Type.Object({}, { additionalProperties: true }),
        response: { 201: Type.Object({ data: SessionEnvelopeSchema }) },
      },
    },
    async (request, reply) => {
      const { businessId, mode } = request.principal;
      const input = readSessionRequest(request.body);
      const now = new Date();
      const expiresAt = new Date(now.getTime() + config.sessionTtlSeconds * 1000);
      // One statement writes the session (its customer, if new, and its payment), its event with a
      // delivery per registered URL and the wake mark, and the response under the Idempotency-Key:
      // atomic by itself, in one round trip. What is signed or answered is built here first.
      const writes: OperationNodeSource[] = [];
      let customer: Payment['customer'];
      if (input.customerId !== undefined) {
        const row = await db
          .selectFrom('customers')
          .select(['id', 'first_name', 'last_name', 'email', 'phone_number', 'billing_address'])
          .where('id', '=', input.customerId)
          .where('business_id', '=', businessId)
          .where('mode', '=', mode)
          .executeTakeFirst();
        if (!row)
          throw new ApiError('validation_failed', 'No such customer.', {
            details: [{ field: 'customer_id', message: 'is not a customer of this account' }],
          });
        customer = {
          ...row,
          billing_address: row.billing_address as Payment['customer']['billing_address'],
          business_id: businessId,
        };
      } else {
        const c = input.customer as Static<typeof CustomerInputSchema>;
        customer = {
          id: randomUUID(),
          first_name: c.first_name,
          last_name: c.last_name,
          email: c.email,
          phone_number: c.phone_number,
          billing_address: c.billing_address,
          business_id: businessId,
        };
        writes.push(
          db.insertInto('customers').values({
            id: customer.id,
            business_id: businessId,
            mode,
            first_name: c.first_name,
            last_name: c.last_name,
            email: c.email,
            phone_number: c.phone_number,
            billing_address: JSON.stringify(c.billing_address),
          }),
        );
      }
      const payment: Payment = {
        id: randomUUID(),
        reference: input.reference,
        correlation_id: randomUUID(),
        amount: input.amount,
        currency: input.currency,
        description: input.description,
        date: isoMicros(now),
        status: 'pending',
        cancellation_reason: null,
        mode,
        customer,
        metadata: input.metadata,
        payment_method: null,
      };
      writes.push(
        db.insertInto('payments').values({
          id: payment.id,
          business_id: businessId,
          mode,
          reference: payment.reference,
          status: 'pending',
          method_type: input.methodType,
          data: JSON.stringify(payment),
          expires_at: expiresAt,
        }),
      );
      // The response is stored under the Idempotency-Key with the session, in one commit.
      const response = { data: envelope(payment, expiresAt) };
      const stored = responseUpdate(db, request, reply, 201, response);
      if (stored) writes.push(stored);
      const { statement } = eventWrite(
        db,
        { type: 'payment.session.created', businessId, mode, payment },
        writes,
      );
      try {
        await db.executeQuery(statement);
      } catch (error) {
        if ((error as { code?: string }).code === '23505') {
          throw new ApiError(
            'duplicate_reference',
            `A payment session with reference ${JSON.stringify(input.reference)} exists already.`,
            { details: [{ field: 'reference', message: 'is already used' }] },
          );
        }
        throw error;
      }
      responseStored(request, 201);
      return response;
    },
  );

  app.get<{ Params: { id: string } }>(
    '/payments/:id',
    {
      schema: {
        summary: 'Get a payment',
        operationId: 'getPayment',
        response: { 200: Type.Object({ data: PaymentSchema }) },
      },
    },
    async (request) => {
      const { businessId, mode } = request.principal;
      const { id } = request.params;
      const row = UUID.test(id)
        ? await db
            .selectFrom('payments')
            .select('data')
            .where('id', '=', id)
            .where('business_id', '=', businessId)
            .where('mode', '=', mode)
            .executeTakeFirst()
        : undefined;
      if (!row) throw new ApiError('not_found', `No payment ${JSON.stringify(id)}.`);
      return { data: row.data as Payment };
    },
  );

  app.get<{ Querystring: PageQuery & { status?: string } }>(
    '/payments',
    {
      schema: listSchema(
        'List payments',
        'listPayments',
        SessionEnvelopeSchema,
        Type.Intersect([
          PageQuery,
          Type.Object({ status: Type.Optional(Type.Union(STATUSES.map((s) => Type.Literal(s)))) }),
        ]),
      ),
    },
    async (request) => {
      const { businessId, mode } = request.principal;
      const status = request.query.status;
      let list = db
        .selectFrom('payments')
        .select(['id', 'data', 'expires_at', 'auth_type', 'links', microsColumn.as('micros')])
        .where('business_id', '=', businessId)
        .where('mode', '=', mode);
      if (status) list = list.where('status', '=', status as (typeof STATUSES)[number]);
      const { rows, pagination } = await listPage(request.query, list);
      return {
        data: rows.map((r) =>
          envelope(r.data as Payment, new Date(r.expires_at), { auth_type: r.auth_type, links: r.links }),
        ),
        pagination,
      };
    },
  );
};
