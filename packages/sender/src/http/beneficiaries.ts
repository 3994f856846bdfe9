import { createHash, randomUUID } from 'node:crypto';
import { AddressSchema } from '@payhook/core';
import type { FastifyPluginAsync } from 'fastify';
import { type Static, Type } from 'typebox';
import { Compile } from 'typebox/compile';
import type { Database } from '../db/database.js';
import { ApiError } from '../errors.js';
import { idempotentWrite } from './idempotency.js';
import { listRoute, listSchema, microsColumn } from './pagination.js';

// The two request shapes of the interface (docs/service-interface.md, "Beneficiaries": the NGN
// shape requires all six of its fields; the USD shape requires routing_number, rail, address and
// bank_address). The currency picks the
// shape; unknown extra fields are accepted and ignored.
const Ngn = Type.Object(
  {
    type: Type.Literal('bank_account'),
    currency: Type.Literal('NGN'),
    account_name: Type.String({ minLength: 1 }),
    account_number: Type.String({ minLength: 1 }),
    bank_name: Type.String({ minLength: 1 }),
    bank_code: Type.String({ minLength: 1 }),
  },
  { additionalProperties: true, title: 'NgnBeneficiaryInput' },
);
const Usd = Type.Object(
  {
    type: Type.Literal('bank_account'),
    currency: Type.Literal('USD'),
    routing_number: Type.String({ minLength: 1 }),
    rail: Type.String({ minLength: 1 }),
    sort_code: Type.Optional(Type.String()),
    account_name: Type.Optional(Type.String()),
    account_number: Type.Optional(Type.String()),
    bank_name: Type.Optional(Type.String()),
    address: AddressSchema,
    bank_address: AddressSchema,
  },
  { additionalProperties: true, title: 'UsdBeneficiaryInput' },
);
const shapes = { NGN: Compile(Ngn), USD: Compile(Usd) };

const Envelope = Type.Object(
  { type: Type.String(), currency: Type.String() },
  { additionalProperties: true, title: 'BeneficiaryInput' },
);

const Nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Union([t, Type.Null()]);
/** A beneficiary as the API returns it: every field of the spec's table. */
export const BeneficiarySchema = Type.Object(
  {
    id: Type.String(),
    user_id: Type.String(),
    type: Type.String(),
    currency: Type.String(),
    account_name: Type.String(),
    account_number: Type.String(),
    account_type: Type.String(),
    bank_name: Type.String(),
    bank_code: Type.String(),
    bank_id: Nullable(Type.String()),
    bic: Nullable(Type.String()),
    routing_number: Nullable(Type.String()),
    sort_code: Nullable(Type.String()),
    address: Type.Union([AddressSchema, Type.Null()]),
    bank_address: Type.Union([AddressSchema, Type.Null()]),
    lifetime: Type.String(),
    virtual: Type.Boolean(),
  },
  { additionalProperties: true, title: 'Beneficiary' },
);

/** The account user a beneficiary belongs to: a stable UUID per business and mode (docs/decisions.md). */
function userIdOf(businessId: string, mode: string): string {
  const h = createHash('sha256').update(`payhook-user:${businessId}:${mode}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${((Number.parseInt(h.slice(16, 17), 16) & 3) | 8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** `POST /beneficiaries` and `GET /beneficiaries`. */
export const beneficiaryRoutes: FastifyPluginAsync<{ database: Database }> = async (app, { database }) => {
  const { db } = database;

  app.post<{ Body: Static<typeof Envelope> & Record<string, unknown> }>(
    '/beneficiaries',
    {
      schema: {
        summary: 'Create a beneficiary',
        operationId: 'createBeneficiary',
        body: Envelope,
        response: { 201: Type.Object({ data: BeneficiarySchema }) },
      },
    },
    async (request, reply) => {
      const { businessId, mode } = request.principal;
      const body: Record<string, unknown> = request.body;
      const currency = body.currency;
      if (currency !== 'NGN' && currency !== 'USD') {
        throw new ApiError('validation_failed', 'Beneficiaries are NGN or USD bank accounts.', {
          details: [{ field: 'currency', message: 'must be NGN or USD' }],
        });
      }
      const validator = shapes[currency];
      // Checked as an unknown value, so that reading the optional fields below stays untyped.
      const input: unknown = body;
      if (!validator.Check(input)) {
        const details = validator.Errors(input).map((e) => {
          const missing = (e.params as { requiredProperties?: string[] }).requiredProperties;
          const path = e.instancePath.replace(/^\//, '').replace(/\//g, '.');
          return {
            field: missing?.length ? [path, missing[0]].filter(Boolean).join('.') : path || 'body',
            message: e.message,
          };
        });
        throw new ApiError('validation_failed', `The ${currency} beneficiary has invalid fields.`, {
          details: details,
        });
      }
      const str = (v: unknown) => (typeof v === 'string' ? v : null);
      const id = randomUUID();
      const data = {
        id,
        user_id: userIdOf(businessId, mode),
        type: 'bank_account',
        currency,
        account_name: str(body.account_name) ?? '',
        account_number: str(body.account_number) ?? '',
        account_type: str(body.account_type) ?? 'savings',
        bank_name: str(body.bank_name) ?? '',
        bank_code: str(body.bank_code) ?? '',
        bank_id: str(body.bank_id),
        bic: str(body.bic),
        routing_number: str(body.routing_number),
        sort_code: str(body.sort_code),
        address: (body.address as Record<string, string> | undefined) ?? null,
        bank_address: (body.bank_address as Record<string, string> | undefined) ?? null,
        lifetime: 'permanent',
        virtual: false,
        ...(currency === 'USD' ? { rail: str(body.rail) } : {}),
      };
      // The beneficiary and the response stored under the request's Idempotency-Key commit
      // together: a process dying in between cannot leave one whose retry would make a second.
      return idempotentWrite(db, request, reply, 201, async (tx) => {
        await tx
          .insertInto('beneficiaries')
          .values({ id, business_id: businessId, mode, currency, data: JSON.stringify(data) })
          .execute();
        return { data };
      });
    },
  );

  listRoute(
    app,
    '/beneficiaries',
    listSchema('List beneficiaries', 'listBeneficiaries', BeneficiarySchema),
    db.selectFrom('beneficiaries').select(['id', 'data', microsColumn.as('micros')]),
    (rows) => rows.map((r) => r.data),
  );
};
