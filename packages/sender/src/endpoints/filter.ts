// Which events an endpoint takes (docs/decisions.md, "Endpoints as objects"). The fan-out at an
// event's creation applies the same rule in SQL (`endpointTakesSql`); the two are tested against
// each other.
import { type RawBuilder, type SqlBool, sql } from 'kysely';

/** The filter that takes every event: the default of a new endpoint, and of every settings URL. */
export const EVERY_EVENT = '*';

/**
 * Whether an endpoint whose `enabled_events` is `filter` takes an event of `type`: the filter is
 * `["*"]`, or names the type exactly (no prefixes, no patterns, case-sensitive).
 *
 * @example
 * ```ts
 * endpointTakes(['payment.session.failed'], 'payment.session.created'); // false
 * ```
 */
export function endpointTakes(filter: readonly string[], type: string): boolean {
  return filter.includes(EVERY_EVENT) || filter.includes(type);
}

/**
 * The same rule as {@link endpointTakes}, as a SQL condition on `enabled_events` (a jsonb array
 * of strings) of the endpoint aliased `alias`, for an event of type `type` (a value, or an
 * expression such as `sql.ref('e.type')`).
 */
export function endpointTakesSql(alias: string, type: string | RawBuilder<unknown>) {
  const column = sql.ref(`${alias}.enabled_events`);
  const value = typeof type === 'string' ? sql`${type}::text` : type;
  return sql<SqlBool>`(${column} @> '["*"]'::jsonb or ${column} @> jsonb_build_array(${value}))`;
}

/**
 * A filter as it is stored: duplicates dropped, first occurrence first. Returns the problems
 * instead when a type is not one of `known` (each named) or `*` is given with other types.
 */
export function normalizeFilter(
  filter: readonly string[],
  known: readonly string[],
): { ok: true; filter: string[] } | { ok: false; problems: { field: string; message: string }[] } {
  const unique = [...new Set(filter)];
  const problems: { field: string; message: string }[] = [];
  if (unique.includes(EVERY_EVENT) && unique.length > 1) {
    problems.push({
      field: 'enabled_events',
      message: '"*" takes every event: give it alone, or list the event types instead',
    });
  }
  filter.forEach((type, i) => {
    if (type !== EVERY_EVENT && !known.includes(type)) {
      problems.push({
        field: `enabled_events.${i}`,
        message: `unknown event type ${JSON.stringify(type)} (known: ${known.join(', ')}, or "*")`,
      });
    }
  });
  return problems.length > 0 ? { ok: false, problems } : { ok: true, filter: unique };
}
