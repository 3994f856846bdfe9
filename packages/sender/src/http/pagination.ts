import type { FastifyInstance, FastifySchema } from 'fastify';
import { type SelectQueryBuilder, type SqlBool, sql } from 'kysely';
import { type Static, type TSchema, Type } from 'typebox';
import { type Position, positionCondition } from '../db/keyset.js';
import { ApiError } from '../errors.js';
import { LIMIT_MESSAGE } from './errors.js';

// A row's position and its SQL are the storage's (listen/ reads rows by it too); the list routes
// take them from here.
export { microsColumn, type Position, positionCondition } from '../db/keyset.js';

/** Query of a list route: `limit` (default 15, at most 100), and one of the cursors `after` / `before`. */
export const PageQuery = Type.Object(
  {
    // Query strings are text, and bodies are never coerced: the number is read here.
    limit: Type.Optional(
      Type.String({ pattern: '^[0-9]{1,3}$', description: 'Page size, 1 to 100 (default 15).' }),
    ),
    after: Type.Optional(
      Type.String({
        maxLength: 200,
        description:
          'The `after` cursor of a previous page (the next, older page); anything this API did not return is 400 `invalid_cursor`.',
      }),
    ),
    before: Type.Optional(
      Type.String({
        maxLength: 200,
        description:
          'The `before` cursor of a previous page (the previous, newer page); anything this API did not return is 400 `invalid_cursor`.',
      }),
    ),
  },
  { additionalProperties: true },
);
export type PageQuery = Static<typeof PageQuery>;

/** The pagination object of a list response; a cursor is `""` when there is no such page. */
export const Pagination = Type.Object(
  { after: Type.String(), before: Type.String(), limit: Type.Integer() },
  { title: 'Pagination' },
);

/**
 * The schema of a list route: its operation, `query` (the page's, or one that extends it), and a
 * page of `item`s with its {@link Pagination} as the answer.
 *
 * @example
 * ```ts
 * app.get('/customers', { schema: listSchema('List customers', 'listCustomers', CustomerSchema) }, read);
 * ```
 */
export function listSchema<Item extends TSchema, Query extends TSchema = typeof PageQuery>(
  summary: string,
  operationId: string,
  item: Item,
  query?: Query,
) {
  return {
    summary,
    operationId,
    querystring: query ?? PageQuery,
    response: { 200: Type.Object({ data: Type.Array(item), pagination: Pagination }) },
  };
}

/** Cursors are opaque: base64url of the position of the row at the edge of a page. */
export function encodeCursor(position: Position): string {
  return Buffer.from(`${position.micros}.${position.id}`, 'utf8').toString('base64url');
}

/** The latest creation time a cursor may name: 9999-12-31T23:59:59.999999Z, in microseconds. */
const MAX_CURSOR_MICROS = 253_402_300_799_999_999n;
const CURSOR_TEXT = /^(0|[1-9][0-9]{0,17})\.([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;

/**
 * Reads a cursor strictly: it must be exactly what {@link encodeCursor} writes for a position the
 * database can hold (a time from 1970 to 9999 in microseconds, a lowercase UUID), so that nothing
 * forged reaches a query. Anything else is 400 `invalid_cursor` naming the parameter.
 */
export function decodeCursor(cursor: string, parameter: 'after' | 'before'): Position {
  const invalid = () =>
    new ApiError('invalid_cursor', `"${parameter}" is not a cursor this API returned.`, {
      details: [{ field: parameter, message: 'is not a valid cursor' }],
    });
  // Buffer's base64url decoder skips what it cannot read: only the canonical spelling is taken.
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(cursor)) throw invalid();
  const bytes = Buffer.from(cursor, 'base64url');
  if (bytes.toString('base64url') !== cursor) throw invalid();
  const match = CURSOR_TEXT.exec(bytes.toString('latin1'));
  if (!match || BigInt(match[1] as string) > MAX_CURSOR_MICROS) throw invalid();
  return { micros: match[1] as string, id: match[2] as string };
}

/** Which way a page request moves, from its query. */
export function direction(query: PageQuery): { limit: number; after?: Position; before?: Position } {
  const limit = query.limit === undefined ? 15 : Number(query.limit);
  if (limit < 1 || limit > 100) {
    throw new ApiError('invalid_request', `"limit" ${LIMIT_MESSAGE}.`, {
      details: [{ field: 'limit', message: LIMIT_MESSAGE }],
    });
  }
  if (query.after && query.before) {
    throw new ApiError('invalid_request', 'Give "after" or "before", not both.', {
      details: [{ field: 'before', message: 'conflicts with after' }],
    });
  }
  return {
    limit,
    ...(query.after ? { after: decodeCursor(query.after, 'after') } : {}),
    ...(query.before ? { before: decodeCursor(query.before, 'before') } : {}),
  };
}

/** Reads rows of one list: `where` (a position condition, or none), order of (created_at, id), at most `limit`. */
export type PageReader<Row> = (
  where: ReturnType<typeof positionCondition> | undefined,
  order: 'asc' | 'desc',
  limit: number,
) => Promise<Row[]>;

/**
 * One page of a list, newest first, by keyset on (created_at, id): stable while rows are
 * inserted, with `after` the cursor of the next (older) page and `before` of the previous
 * (newer) one, each `""` when there is no such page.
 */
export async function keysetPage<Row extends Position>(
  query: PageQuery,
  read: PageReader<Row>,
): Promise<{ rows: Row[]; pagination: { after: string; before: string; limit: number } }> {
  const page = direction(query);
  let rows: Row[];
  if (page.before) {
    // Newer rows than the cursor: read upwards, then put back in newest-first order.
    rows = (await read(positionCondition('>', page.before), 'asc', page.limit + 1)).reverse();
  } else {
    rows = await read(page.after ? positionCondition('<', page.after) : undefined, 'desc', page.limit + 1);
  }
  const more = rows.length > page.limit;
  if (more) rows = page.before ? rows.slice(1) : rows.slice(0, page.limit);
  const first = rows[0];
  const last = rows[rows.length - 1];
  const exists = async (op: '<' | '>', row: Row | undefined) =>
    row !== undefined && (await read(positionCondition(op, row), op === '<' ? 'desc' : 'asc', 1)).length > 0;
  const hasOlder = page.before ? await exists('<', last) : more;
  const hasNewer = page.before ? more : await exists('>', first);
  return {
    rows,
    pagination: {
      after: hasOlder && last ? encodeCursor(last) : '',
      before: hasNewer && first ? encodeCursor(first) : '',
      limit: page.limit,
    },
  };
}

/**
 * One page of a list route (see {@link keysetPage}) read with `rows`: a SELECT of the list's rows
 * (of the key's business and mode, with the route's filters, selecting `micros` and `id`), to
 * which the page adds its order on (created_at, id), its bound and its limit.
 *
 * @example
 * ```ts
 * const rows = db.selectFrom('customers').select(['id', microsColumn.as('micros')]).where('mode', '=', mode);
 * const { rows: page, pagination } = await listPage(request.query, rows);
 * ```
 */
export function listPage<DB, TB extends keyof DB, Row extends Position>(
  query: PageQuery,
  rows: SelectQueryBuilder<DB, TB, Row>,
): ReturnType<typeof keysetPage<Row>> {
  return keysetPage<Row>(query, (where, order, limit) => {
    const page = rows.orderBy(sql.ref('created_at'), order).orderBy(sql.ref('id'), order).limit(limit);
    return (where ? page.where(where) : page).execute() as Promise<Row[]>;
  });
}

/**
 * `GET path`, the list route of a table of the key's own rows: a page (see {@link listPage}) of
 * `rows`, a SELECT of a table with `business_id` and `mode` columns (selecting `micros` and `id`)
 * to which the route adds the key's business and mode, answered as `present` shows the page's rows.
 *
 * @example
 * ```ts
 * const customers = db.selectFrom('customers').select(CUSTOMER_COLUMNS);
 * listRoute(app, '/customers', listSchema('List customers', 'listCustomers', CustomerSchema), customers, (rows) =>
 *   rows.map(toCustomer),
 * );
 * ```
 */
export function listRoute<DB, TB extends keyof DB, Row extends Position>(
  app: FastifyInstance,
  path: string,
  schema: FastifySchema,
  rows: SelectQueryBuilder<DB, TB, Row>,
  present: (rows: Row[]) => unknown[],
): void {
  app.get<{ Querystring: PageQuery }>(path, { schema }, async (request) => {
    const { businessId, mode } = request.principal;
    const own = sql<SqlBool>`${sql.ref('business_id')} = ${businessId} and ${sql.ref('mode')} = ${mode}`;
    const { rows: page, pagination } = await listPage(request.query, rows.where(own));
    return { data: present(page), pagination };
  });
}
