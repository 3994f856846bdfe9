// Statements prepared with PREPARE (SQL) on a connection, for the round trips that send several
// statements in one simple query (which takes no parameters, so a prepared statement is run with
// EXECUTE and literal arguments). Tracked per connection, whichever store of its pool prepared them.
import type { PoolClient } from 'pg';

const preparedOn = new WeakMap<PoolClient, Set<string>>();

/** Whether `client` has prepared `name`. */
export function isPrepared(client: PoolClient, name: string): boolean {
  return preparedOn.get(client)?.has(name) === true;
}

/** Records that `client` prepared `name` (once the query that sent the PREPARE succeeded). */
export function markPrepared(client: PoolClient, name: string): void {
  const prepared = preparedOn.get(client);
  if (prepared) prepared.add(name);
  else preparedOn.set(client, new Set([name]));
}

/** A text argument of an EXECUTE, as a literal. */
export const textLiteral = (client: PoolClient, value: string): string => client.escapeLiteral(value);

/** A numeric argument of an EXECUTE, as a literal; NULL for undefined. */
export function numberLiteral(value: number | undefined): string {
  if (value === undefined) return 'NULL';
  if (!Number.isFinite(value)) throw new TypeError(`Invalid number: ${value}`);
  return `(${value})`;
}
