import { CustomerInputSchema, CustomerSchema } from '@payhook/core';
import type { FastifyPluginAsync } from 'fastify';
import type { Kysely } from 'kysely';
import { type Static, Type } from 'typebox';
import type { Database } from '../db/database.js';
import type { Schema } from '../db/schema.js';
import { ApiError } from '../errors.js';
import { emailProblem } from './email.js';
import { idempotentWrite } from './idempotency.js';
import { listRoute, listSchema, microsColumn } from './pagination.js';

type CustomerRow = {
  id: string;
  first_name: string;
  last_name: string;
  email: string;
  phone_number: string;
  billing_address: Record<string, string>;
  micros: string;
};

/** The columns a customer is answered with, as created and as listed. */
const CUSTOMER_COLUMNS = [
  'id',
  'first_name',
  'last_name',
  'email',
  'phone_number',
  'billing_address',
  microsColumn.as('micros'),
] as const;

const toCustomer = (row: CustomerRow) => ({
  id: row.id,
  first_name: row.first_name,
  last_name: row.last_name,
  email: row.email,
  phone_number: row.phone_number,
  billing_address: row.billing_address,
});

/** `POST /customers` and `GET /customers/`. */
export const customerRoutes: FastifyPluginAsync<{ database: Database }> = async (app, { database }) => {
  const db: Kysely<Schema> = database.db;

  app.post<{ Body: Static<typeof CustomerInputSchema> }>(
    '/customers',
    {
      schema: {
        summary: 'Create a customer',
        operationId: 'createCustomer',
        description:
          '`email` has exactly one @, 1 to 64 characters before it, a domain of at least two dot-separated labels after it, and no whitespace or control characters (CR and LF included); at most 254 characters. Otherwise 422.',
        body: CustomerInputSchema,
        response: { 201: Type.Object({ data: CustomerSchema }) },
      },
    },
    async (request, reply) => {
      const { businessId, mode } = request.principal;
      const body = request.body;
      const problem = emailProblem(body.email);
      if (problem) {
        throw new ApiError('validation_failed', 'The customer has invalid fields.', {
          details: [{ field: 'email', message: problem }],
        });
      }
      // The customer and the response stored under the request's Idempotency-Key commit together:
      // a process dying in between cannot leave a customer whose retry would make a second one.
      return idempotentWrite(db, request, reply, 201, async (tx) => {
        const row = await tx
          .insertInto('customers')
          .values({
            business_id: businessId,
            mode,
            first_name: body.first_name,
            last_name: body.last_name,
            email: body.email,
            phone_number: body.phone_number,
            billing_address: JSON.stringify(body.billing_address),
          })
          .returning(CUSTOMER_COLUMNS)
          .executeTakeFirstOrThrow();
        return { data: toCustomer(row) };
      });
    },
  );

  listRoute(
    app,
    '/customers',
    listSchema('List customers', 'listCustomers', CustomerSchema),
    db.selectFrom('customers').select(CUSTOMER_COLUMNS),
    (rows) => rows.map(toCustomer),
  );
};
