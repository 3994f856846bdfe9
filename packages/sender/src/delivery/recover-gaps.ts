import { EVERY_EVENT } from '../endpoints/filter.js';

/** An endpoint's status and filter from `at` on (a row of `endpoint_history`, migration 0015). */
export interface HistoryRow {
  at: Date;
  status: 'enabled' | 'disabled';
  enabled_events: string[];
}

/** Which events of a gap could lack a delivery: all, or only those of some types, or all but some. */
export type TypeScope =
  | { kind: 'all' }
  | { kind: 'only'; types: string[] }
  | { kind: 'except'; types: string[] };

/** A time when events could have been made without a delivery to the endpoint. */
export interface Gap {
  from: Date;
  until: Date;
  types: TypeScope;
}

/**
 * The events an endpoint taking `current` would take and one taking `then` did not: none, when
 * `then` took all of them.
 */
function missedTypes(then: readonly string[], current: readonly string[]): TypeScope | null {
  if (then.includes(EVERY_EVENT)) return null;
  if (current.includes(EVERY_EVENT)) return { kind: 'except', types: [...then] };
  const missed = current.filter((type) => !then.includes(type));
  return missed.length === 0 ? null : { kind: 'only', types: missed };
}

/**
 * The times in `window` when events of the endpoint's business could have been made without a
 * delivery to it, for the types its filter takes now: while it was disabled, or while its filter
 * left out a type it takes now, or before its history begins (an endpoint made before migration
 * 0015: anything could have been missed). Outside them, every event the endpoint takes got a
 * delivery when it was made, and a recovery need not read it. Oldest first.
 *
 * @example
 * ```ts
 * missedGaps(endpoint, history, { since, until }); // [] for an endpoint always enabled, filter unchanged
 * ```
 */
export function missedGaps(
  endpoint: { created_at: Date; enabled_events: readonly string[] },
  history: readonly HistoryRow[],
  window: { since: Date; until: Date },
): Gap[] {
  const periods: Gap[] = [];
  const firstAt = history[0]?.at ?? window.until;
  if (firstAt > endpoint.created_at) {
    periods.push({ from: endpoint.created_at, until: firstAt, types: { kind: 'all' } });
  }
  history.forEach((row, i) => {
    const until = history[i + 1]?.at ?? window.until;
    const types: TypeScope | null =
      row.status === 'disabled' ? { kind: 'all' } : missedTypes(row.enabled_events, endpoint.enabled_events);
    if (types) periods.push({ from: row.at, until, types });
  });
  const start = Math.max(window.since.getTime(), endpoint.created_at.getTime());
  const gaps: Gap[] = [];
  for (const period of periods) {
    const from = new Date(Math.max(period.from.getTime(), start));
    const until = new Date(Math.min(period.until.getTime(), window.until.getTime()));
    if (from >= until) continue;
    const last = gaps.at(-1);
    if (last && last.until.getTime() === from.getTime() && sameScope(last.types, period.types)) {
      last.until = until;
    } else {
      gaps.push({ from, until, types: period.types });
    }
  }
  return gaps;
}

const sameScope = (a: TypeScope, b: TypeScope) =>
  a.kind === b.kind &&
  (a.kind === 'all' ||
    JSON.stringify([...a.types].sort()) === JSON.stringify([...(b as typeof a).types].sort()));
