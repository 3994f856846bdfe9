// Per-object order in PostgreSQL (core's ObjectOrderStore): a table of objects beside the inbox,
// one row per object (business + object id) with its highest completed rank and the claim that
// holds its lock (the event's key and its attempts then). The lock is held while that claim lasts:
// the event `processing` under a live lease in the inbox, claimed no more times since. So it needs
// no renewal of its own: a holder that died frees it when its lease lapses.
import type { ObjectLock, ObjectOrderStore } from '@payhook/core';
import type { PoolClient } from 'pg';
import { isPrepared, markPrepared, numberLiteral, textLiteral } from './prepared.js';
import { guard, NOW, type Statement, statement } from './statements.js';
import type { createTransactionRunner } from './transaction.js';

/** The order's statements on the inbox `inbox` and its objects table `objects` (both qualified). */
export function orderStatements(inbox: string, objects: string) {
  const completion = completionOf(inbox, objects);
  // The claim that locked an object is live: its event processing under a live lease, claimed the
  // same number of times (a recovery or a redelivery after a failure is a new claim).
  const live = (at: string) =>
    `SELECT 1 FROM ${inbox} h WHERE h.key = o.holder AND h.attempts = o.holder_attempts
  AND h.state = 'processing' AND h.lease_until > ${at} AND h.expires_at > ${at}`;
  return {
    /** $1 key, $2 owner, $3 object id, $4 retentionMs; run by {@link lockUnflushed}. */
    lock: statement(
      'unflushed_lock',
      `WITH n AS (SELECT ${NOW} AS ms),
held AS (SELECT attempts FROM ${inbox}, n WHERE key = $1 AND state = 'processing' AND owner = $2
  AND lease_until > n.ms AND expires_at > n.ms),
taken AS (
  INSERT INTO ${objects} AS o (id, rank, holder, holder_attempts, updated_at, expires_at)
  SELECT $3, NULL, $1, held.attempts, n.ms, n.ms + $4 FROM n, held
  ON CONFLICT (id) DO UPDATE SET holder = EXCLUDED.holder, holder_attempts = EXCLUDED.holder_attempts,
    updated_at = EXCLUDED.updated_at, expires_at = EXCLUDED.expires_at,
    rank = CASE WHEN o.expires_at <= EXCLUDED.updated_at THEN NULL ELSE o.rank END
  WHERE o.holder IS NULL OR o.expires_at <= EXCLUDED.updated_at
    OR (o.holder = EXCLUDED.holder AND o.holder_attempts = EXCLUDED.holder_attempts)
    OR NOT EXISTS (${live('EXCLUDED.updated_at')})
  RETURNING o.rank
)
SELECT EXISTS (SELECT 1 FROM held) AS held, EXISTS (SELECT 1 FROM taken) AS locked, (SELECT rank FROM taken) AS rank`,
    ),
    /**
     * $1 key, $2 owner, $3 retentionMs, $4 object id, $5 rank (or null): the done mark, the rank
     * raised and the lock freed, in one statement; `n` is 1 when the owner held the key.
     */
    complete: statement(
      'ordered_complete',
      `${completion}
SELECT (SELECT count(*) FROM done)::int AS n, (SELECT count(*) FROM raised)::int AS raised`,
    ),
    /** The same, for {@link commitDone}: it fails unless the owner held the key. */
    completeGuarded: `${completion}\n${guard}`,
    /** Removes up to 500 object records past their retention whose lock no live event holds. */
    purge: statement(
      'purge_objects',
      `DELETE FROM ${objects} WHERE id IN (
  SELECT id FROM ${objects} o WHERE o.expires_at <= ${NOW}
    AND (o.holder IS NULL OR NOT EXISTS (${live(NOW)}))
  LIMIT 500 FOR UPDATE SKIP LOCKED)`,
    ),
  };
}

/** The order's completion as CTEs: \`done\` (the done mark) and \`raised\` (rank raised, lock freed). */
function completionOf(inbox: string, objects: string): string {
  return `WITH n AS (SELECT ${NOW} AS ms),
done AS (
  UPDATE ${inbox} SET state = 'done', owner = NULL, lease_until = NULL, payload = NULL,
    updated_at = n.ms, expires_at = n.ms + $3
  FROM n WHERE key = $1 AND state = 'processing' AND owner = $2 AND expires_at > n.ms
  RETURNING key
),
raised AS (
  INSERT INTO ${objects} AS o (id, rank, holder, updated_at, expires_at)
  SELECT $4, $5::double precision, NULL, n.ms, n.ms + $3 FROM n WHERE EXISTS (SELECT 1 FROM done)
  ON CONFLICT (id) DO UPDATE SET
    rank = CASE WHEN o.expires_at <= EXCLUDED.updated_at THEN EXCLUDED.rank
      WHEN EXCLUDED.rank IS NOT NULL AND (o.rank IS NULL OR EXCLUDED.rank > o.rank) THEN EXCLUDED.rank
      ELSE o.rank END,
    holder = CASE WHEN o.holder = $1 THEN NULL ELSE o.holder END,
    updated_at = EXCLUDED.updated_at, expires_at = EXCLUDED.expires_at
  RETURNING 1
)`;
}

/** The object record of `object` for the event `key`: objects of different businesses never meet. */
export function objectId(key: string, object: string): string {
  return `${key.slice(0, Math.max(0, key.lastIndexOf(':')))}\n${object}`;
}

type Run = <R extends object>(
  label: string,
  statement: Statement,
  values: unknown[],
) => Promise<{ rows: R[] }>;

/** What the order needs from its store. */
export interface PostgresOrderOptions {
  statements: ReturnType<typeof orderStatements>;
  retentionMs: number;
  /** Runs one of the store's statements under its timeout. */
  query: Run;
  /** The transaction runner's `ahead`: the lock is sent in the round trip that opens the attempt. */
  ahead: Ahead;
  /** Waits until the inbox exists. */
  ready(): Promise<void>;
}

type Ahead = ReturnType<typeof createTransactionRunner>['ahead'];

/** Per-object order for the PostgreSQL store. */
export function createPostgresOrder(options: PostgresOrderOptions): ObjectOrderStore {
  const { statements, retentionMs, query } = options;
  return {
    async lock(key, owner, object): Promise<ObjectLock> {
      await options.ready();
      const row = await lockUnflushed(options, key, owner, (client) =>
        [key, owner, objectId(key, object)]
          .map((text) => textLiteral(client, text))
          .concat(numberLiteral(retentionMs)),
      );
      if (!row?.held) return LOST;
      if (!row.locked) return BUSY;
      return { status: 'locked', rank: row.rank ?? undefined };
    },
    async complete(key, owner, object, rank) {
      const { rows } = await query<{ n: number }>('ordered complete', statements.complete, [
        key,
        owner,
        retentionMs,
        objectId(key, object),
        rank ?? null,
      ]);
      return rows[0]?.n === 1;
    },
  };
}

type LockRow = { held: boolean; locked: boolean; rank: number | null };

/**
 * Runs the lock statement in a transaction that commits without waiting for its WAL record to
 * reach the disk (`synchronous_commit` off for that transaction alone), in the round trip that
 * opens the attempt's transaction on the same connection when the lock is taken (the transaction
 * runner's `ahead`). A lock is worth keeping only while its holder's transaction can still commit:
 * if the server crashes before the record is flushed, the holder's connection and open transaction
 * are gone with it, and the handler's own commit (flushed, as every commit of the merchant's)
 * flushes the lock's record before it. So the lock costs one commit that waits on no disk, against
 * the claim's and the handler's that do, and no round trip of its own.
 */
async function lockUnflushed(
  options: PostgresOrderOptions,
  key: string,
  owner: string,
  args: (client: PoolClient) => string[],
): Promise<LockRow | undefined> {
  const { name, text } = options.statements.lock;
  let preparing: PoolClient | undefined;
  const results = await options.ahead<LockRow>(
    key,
    owner,
    (client) => {
      if (!isPrepared(client, name)) preparing = client;
      const prepare =
        preparing === undefined ? '' : `PREPARE ${name} (text, text, text, bigint) AS ${text};\n`;
      return `${prepare}BEGIN;\nSET LOCAL synchronous_commit TO off;\nEXECUTE ${name}(${args(client).join(', ')});\nCOMMIT`;
    },
    (sent) => {
      const row = sent.find((result) => result.command === 'SELECT')?.rows[0];
      return row?.held === true && row.locked;
    },
  );
  if (preparing) markPrepared(preparing, name);
  return results.find((result) => result.command === 'SELECT')?.rows[0];
}

const LOST: ObjectLock = { status: 'lost' };
const BUSY: ObjectLock = { status: 'busy' };
