import { type SqlBool, sql } from 'kysely';

/** A row's position in newest-first order: creation time in microseconds, then id. */
export interface Position {
  micros: string;
  id: string;
}

/** Rows newer (`>`) or older (`<`) than a position, as a SQL condition on (created_at, id). */
export function positionCondition(op: '<' | '>', position: Position) {
  return sql<SqlBool>`(created_at, id) ${sql.raw(op)} (to_timestamp(${position.micros}::numeric / 1000000), ${position.id}::uuid)`;
}

/** A row's creation time in microseconds, as text (select it `as micros`). */
export const microsColumn = sql<string>`(extract(epoch from created_at) * 1000000)::bigint::text`;
