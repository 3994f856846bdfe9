import { type Static, Type } from 'typebox';
import { ApiError } from './errors.js';

/** Query of a list route: `limit` (default 15, at most 100), and one of the cursors `after` / `before`. */
export const PageQuery = Type.Object(
  {
    // Query strings are text, and bodies are never coerced: the number is read here.
    limit: Type.Optional(
      Type.String({ pattern: '^[0-9]{1,3}$', description: 'Page size, 1 to 100 (default 15).' }),
    ),
    after: Type.Optional(Type.String({ maxLength: 200 })),
    before: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: true },
);
export type PageQuery = Static<typeof PageQuery>;

/** The pagination object of a list response; a cursor is `""` when there is no such page. */
export const Pagination = Type.Object(
  { after: Type.String(), before: Type.String(), limit: Type.Integer() },
  { title: 'Pagination' },
);

/** A row's position in newest-first order: creation time in microseconds, then id. */
export interface Position {
  micros: string;
  id: string;
}

/** Cursors are opaque: base64url of the position of the row at the edge of a page. */
export function encodeCursor(position: Position): string {
  return Buffer.from(`${position.micros}.${position.id}`, 'utf8').toString('base64url');
}

/** Reads a cursor; anything that is not one of ours is a 400 naming the parameter. */
export function decodeCursor(cursor: string, parameter: 'after' | 'before'): Position {
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const match = /^(\d{1,20})\.([0-9a-f-]{36})$/.exec(text);
  if (!match)
    throw new ApiError(400, 'invalid_request', `"${parameter}" is not a cursor this API returned.`, [
      { field: parameter, message: 'is not a valid cursor' },
    ]);
  return { micros: match[1] as string, id: match[2] as string };
}

/** Which way a page request moves, from its query. */
export function direction(query: PageQuery): { limit: number; after?: Position; before?: Position } {
  const limit = query.limit === undefined ? 15 : Number(query.limit);
  if (limit < 1 || limit > 100) {
    throw new ApiError(400, 'invalid_request', '"limit" is from 1 to 100.', [
      { field: 'limit', message: 'must be from 1 to 100' },
    ]);
  }
  if (query.after && query.before) {
    throw new ApiError(400, 'invalid_request', 'Give "after" or "before", not both.', [
      { field: 'before', message: 'conflicts with after' },
    ]);
  }
  return {
    limit,
    ...(query.after ? { after: decodeCursor(query.after, 'after') } : {}),
    ...(query.before ? { before: decodeCursor(query.before, 'before') } : {}),
  };
}
