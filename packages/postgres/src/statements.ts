// The store's statements. Each is one round trip and one statement, atomic on its own: the claim
// is an INSERT ... ON CONFLICT DO UPDATE whose every column takes the claim's value only when the
// row it met may be claimed (unknown, expired, failed, or its lease lapsed), so that of concurrent
// claims of one key exactly one wins (they queue on the row's lock) and each learns the outcome
// from the row it leaves. It claims a group of distinct keys at once (see claims.ts), taking their
// rows in the keys' byte order, so that two groups that share keys never wait on each other in a
// circle. Times are epoch ms of the server's clock at the statement's start.

import { createHash } from 'node:crypto';

/** Now, in epoch ms of the server's clock at the statement's start. */
export const NOW = '(extract(epoch from statement_timestamp()) * 1000)::bigint';

/**
 * A statement the store prepares once per connection (parsed and planned once, not per event):
 * named by its text's hash, so that stores on other tables of one pool never share a name.
 */
export interface Statement {
  name: string;
  text: string;
}

/** The statements of the inbox at `name` (schema-qualified and quoted). */
export interface Statements {
  /** Arrays of the group's: $1 keys (distinct), $2 owners, $3 leasesMs, $4 payloads, $5 businessIds; $6 retentionMs. */
  claim: Statement;
  /** $1 key, $2 owner, $3 leaseMs. */
  renew: Statement;
  /** $1 key, $2 owner, $3 retentionMs. Also the done mark inside a handler's transaction. */
  complete: Statement;
  /** $1 key, $2 owner, $3 retentionMs, $4 error. */
  fail: Statement;
  /** $1 owner, $2 leaseMs, $3 limit. */
  recover: Statement;
  /** Removes up to 500 records past their retention. */
  purge: Statement;
  /** $1 key. */
  get: Statement;
}

/** The statements of the inbox at `name`, each with its prepared statement's name. */
export function statements(name: string): Statements {
  const texts = sqlOf(name);
  const out = {} as Statements;
  for (const [label, text] of Object.entries(texts) as [keyof Statements, string][]) {
    out[label] = statement(label, text);
  }
  return out;
}

/** A statement named by its label and its text's hash. */
export function statement(label: string, text: string): Statement {
  const hash = createHash('sha256').update(text).digest('hex').slice(0, 16);
  return { name: `payhook_${label}_${hash}`, text };
}

function sqlOf(name: string): Record<keyof Statements, string> {
  // Whether the row the claim met (`e`, as it was) may be claimed; `EXCLUDED.updated_at` is now.
  const expired = 'e.expires_at <= EXCLUDED.updated_at';
  const claimable = `(${expired} OR e.state = 'failed' OR (e.state = 'processing' AND e.lease_until <= EXCLUDED.updated_at))`;
  const take = (column: string, value = `EXCLUDED.${column}`) =>
    `${column} = CASE WHEN ${claimable} THEN ${value} ELSE e.${column} END`;
  const held = `key = $1 AND state = 'processing' AND owner = $2 AND expires_at > ${NOW}`;
  return {
    claim: `INSERT INTO ${name} AS e (key, state, owner, lease_until, payload, business_id, attempts,
  received_at, updated_at, expires_at, last_claim)
SELECT c.key, 'processing', c.owner, n.ms + c.lease, c.payload, c.business_id, 1, n.ms, n.ms, n.ms + $6, 'new'
FROM (SELECT ${NOW} AS ms) n,
  unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[]) AS c(key, owner, lease, payload, business_id)
ORDER BY c.key COLLATE "C"
ON CONFLICT (key) DO UPDATE SET
  last_claim = CASE WHEN ${expired} THEN 'new' WHEN e.state = 'failed' THEN 'failed'
    WHEN ${claimable} THEN 'expired' ELSE 'duplicate' END,
  ${take('state')}, ${take('owner')}, ${take('lease_until')}, ${take('payload')}, ${take('business_id')},
  ${take('attempts', `CASE WHEN ${expired} THEN 1 ELSE e.attempts + 1 END`)},
  ${take('error', `CASE WHEN ${expired} THEN NULL ELSE e.error END`)},
  ${take('received_at', `CASE WHEN ${expired} THEN EXCLUDED.received_at ELSE e.received_at END`)},
  ${take('updated_at')}, ${take('expires_at')}
RETURNING key, last_claim, state, owner, attempts`,
    renew: `UPDATE ${name} SET lease_until = ${NOW} + $3 WHERE ${held}`,
    complete: `UPDATE ${name} SET state = 'done', owner = NULL, lease_until = NULL, payload = NULL,
  updated_at = ${NOW}, expires_at = ${NOW} + $3 WHERE ${held}`,
    fail: `UPDATE ${name} SET state = 'failed', owner = NULL, lease_until = NULL, error = $4,
  updated_at = ${NOW}, expires_at = ${NOW} + $3 WHERE ${held}`,
    recover: `WITH n AS (SELECT ${NOW} AS ms),
due AS (
  SELECT key FROM ${name}, n
  WHERE state = 'processing' AND lease_until <= n.ms AND expires_at > n.ms AND payload IS NOT NULL
  ORDER BY lease_until LIMIT $3 FOR UPDATE SKIP LOCKED
)
UPDATE ${name} AS e SET owner = $1, lease_until = n.ms + $2, attempts = e.attempts + 1, updated_at = n.ms
FROM due, n WHERE e.key = due.key
RETURNING e.key, e.payload, e.business_id, e.attempts`,
    purge: `DELETE FROM ${name} WHERE key IN (
  SELECT key FROM ${name} WHERE expires_at <= ${NOW} LIMIT 500 FOR UPDATE SKIP LOCKED)`,
    get: `SELECT key, state, owner, lease_until, payload, business_id, attempts, error, received_at, updated_at
FROM ${name} WHERE key = $1 AND expires_at > ${NOW}`,
  };
}

/** What the guard of a done mark says when the owner no longer held the key. */
export const NOT_HELD = 'payhook: the event is no longer this owner';

/** A final SELECT over the CTE `done` that fails (and so aborts the transaction) unless it has one row. */
export const guard = `SELECT CASE WHEN (SELECT count(*) FROM done) = 1 THEN 1
  ELSE ('${NOT_HELD} ' || (SELECT count(*) FROM done))::int END AS n`;

/** The plain done mark `mark` (an UPDATE), guarded as {@link guard}. */
export const guarded = (mark: string): string => `WITH done AS (${mark} RETURNING 1)\n${guard}`;
