import { CustomerInputSchema, CustomerSchema } from '@payhook/core';
import type { FastifyPluginAsync } from 'fastify';
import { type Expression, type Kysely, type SqlBool, sql } from 'kysely';
import { type Static, Type } from 'typebox';
import type { Database } from '../db/database.js';
import type { Schema } from '../db/schema.js';
import { direction, encodeCursor, PageQuery, Pagination } from './pagination.js';

type CustomerRow = {
  id: string;
  first_name: string;
  last_name: string;
  email: string;
  phone_number: string;
  billing_address: Record<string, string>;
  micros: string;
};

const toCustomer = (row: CustomerRow) => ({
  id: row.id,
  first_name: row.first_name,
  last_name: row.last_name,
  email: row.email,
  phone_number: row.phone_number,
  billing_address: row.billing_address,
});

const micros = sql<string>`(extract(epoch from created_at) * 1000000)::bigint::text`;

/** `POST /customers` and `GET /customers/`. */
export const customerRoutes: FastifyPluginAsync<{ database: Database }> = async (app, { database }) => {
  const db: Kysely<Schema> = database.db;

  app.post<{ Body: Static<typeof CustomerInputSchema> }>(
    '/customers',
    { schema: { body: CustomerInputSchema, response: { 201: Type.Object({ data: CustomerSchema }) } } },
    async (request, reply) => {
      const { businessId, mode } = request.principal;
      const body = request.body;
      const row = await db
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
        .returning([
          'id',
          'first_name',
          'last_name',
          'email',
          'phone_number',
          'billing_address',
          micros.as('micros'),
        ])
        .executeTakeFirstOrThrow();
      reply.code(201);
      return { data: toCustomer(row) };
    },
  );

  app.get<{ Querystring: PageQuery }>(
    '/customers',
    {
      schema: {
        querystring: PageQuery,
        response: { 200: Type.Object({ data: Type.Array(CustomerSchema), pagination: Pagination }) },
      },
    },
    async (request) => {
      const { businessId, mode } = request.principal;
      const page = direction(request.query);
      const base = db
        .selectFrom('customers')
        .select([
          'id',
          'first_name',
          'last_name',
          'email',
          'phone_number',
          'billing_address',
          micros.as('micros'),
        ])
        .where('business_id', '=', businessId)
        .where('mode', '=', mode);
      // (created_at, id) compared as a row, in the index's order: stable while rows are inserted.
      const position = (op: '<' | '>', p: { micros: string; id: string }): Expression<SqlBool> =>
        sql<SqlBool>`(created_at, id) ${sql.raw(op)} (to_timestamp(${p.micros}::numeric / 1000000), ${p.id}::uuid)`;
      let rows: CustomerRow[];
      if (page.before) {
        // Newer rows than the cursor: read upwards, then put back in newest-first order.
        rows = (
          await base
            .where(position('>', page.before))
            .orderBy('created_at', 'asc')
            .orderBy('id', 'asc')
            .limit(page.limit + 1)
            .execute()
        ).reverse();
      } else {
        let q = base
          .orderBy('created_at', 'desc')
          .orderBy('id', 'desc')
          .limit(page.limit + 1);
        if (page.after) q = q.where(position('<', page.after));
        rows = await q.execute();
      }
      const more = rows.length > page.limit;
      if (more) rows = page.before ? rows.slice(1) : rows.slice(0, page.limit);
      const first = rows[0];
      const last = rows[rows.length - 1];
      const exists = async (op: '<' | '>', p: CustomerRow | undefined) =>
        p !== undefined && (await base.where(position(op, p)).limit(1).execute()).length > 0;
      const hasOlder = page.before ? await exists('<', last) : more;
      const hasNewer = page.before ? more : await exists('>', first);
      return {
        data: rows.map(toCustomer),
        pagination: {
          after: hasOlder && last ? encodeCursor(last) : '',
          before: hasNewer && first ? encodeCursor(first) : '',
          limit: page.limit,
        },
      };
    },
  );
};
