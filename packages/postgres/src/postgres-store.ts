import type {
  IdempotencyStore,
  ObjectOrderStore,
  OrderedCompletion,
  RecoveredEvent,
  StoredEvent,
} from '@payhook/core';
import pg, { type Pool, type QueryResultRow } from 'pg';
import { type ClaimRow, claimResult, createClaimGroups, type PendingClaim } from './claims.js';
import { createCommitter } from './commit.js';
import { type PostgresStoreOptions, resolveOptions } from './options.js';
import { createPostgresOrder, orderStatements } from './order.js';
import { migrateInbox, objectsName, qualifiedName } from './schema.js';
import { guarded, type Statement, statements } from './statements.js';
import { withTimeout } from './timeout.js';
import { createTransactionRunner } from './transaction.js';

/** The PostgreSQL store: an {@link IdempotencyStore} that runs each attempt in a transaction. */
export interface PostgresStore extends IdempotencyStore {
  /** The pool the store and the handlers' transactions use. */
  readonly pool: Pool;
  /** The inbox table, schema-qualified and quoted (`"payhook"."inbox"`). */
  readonly table: string;
  /** Creates the inbox if missing; the store does so on first use unless `migrate: false`. */
  migrate(): Promise<void>;
  /** Per-object order: payment by payment, across every instance on this database. */
  readonly order: ObjectOrderStore;
  runInTransaction(
    key: string,
    owner: string,
    run: (transaction: unknown) => unknown,
    order?: OrderedCompletion,
  ): Promise<boolean>;
}

interface Row {
  key: string;
  state: StoredEvent['state'];
  owner: string | null;
  lease_until: string | null;
  payload: string | null;
  business_id: string | null;
  attempts: number;
  error: string | null;
  received_at: string;
  updated_at: string;
}

/**
 * A transactional inbox in the merchant's own PostgreSQL, shared by every receiver instance: an
 * event is claimed in one statement (with its verified payload, before the 200 is sent; the claims
 * that come while others are in flight share the next statement), its lease
 * renewed while its handlers run, and each attempt of its handlers runs in a transaction of the
 * store's pool (`context.transaction`, or typed: `pgTransaction(context)`) that also marks the
 * event done. The handlers' writes and the done mark commit together or not at all: a handler that
 * throws rolls both back and the event is retried; an instance that dies mid-handler commits
 * neither, and another instance runs the event under the lease rules; a lapsed owner's commit finds
 * the event no longer its own and rolls back. So an effect written through the transaction happens
 * once. Effects outside it (an email, an HTTP call) stay at-least-once.
 *
 * @example
 * ```ts
 * import pg from 'pg';
 * import { createReceiver } from '@payhook/core';
 * import { createPostgresStore, pgTransaction } from '@payhook/postgres';
 *
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 20 });
 * const receiver = createReceiver({
 *   businessIds: [process.env.BUSINESS_ID!],
 *   allowedIps: ['203.0.113.10'],
 *   store: createPostgresStore({ pool }),
 * });
 * receiver.on('payment.session.succeeded', async (event, context) => {
 *   await pgTransaction(context).query('UPDATE orders SET paid = true WHERE reference = $1', [
 *     event.data.reference,
 *   ]);
 * });
 * ```
 */
export function createPostgresStore(options: PostgresStoreOptions): PostgresStore {
  const { schema, table, retentionMs, timeoutMs, migrate } = resolveOptions(options);
  let pool: Pool;
  let owned = false;
  if (typeof options.pool === 'string') {
    pool = new pg.Pool({ connectionString: options.pool, ...options.poolOptions });
    owned = true;
  } else if (options.pool && typeof (options.pool as Pool).connect === 'function') {
    pool = options.pool;
  } else {
    throw new TypeError('Invalid pool: pass a pg Pool or a postgres:// connection string.');
  }
  // An idle connection that breaks (the server restarted) must not crash the process: the pool
  // drops it, the next statement connects anew, or fails and the receiver answers 503.
  pool.on('error', ignore);
  const name = qualifiedName(schema, table);
  const sql = statements(name);
  const orderSql = orderStatements(name, objectsName(schema, table));
  const committer = createCommitter({ plain: guarded(sql.complete.text), ordered: orderSql.completeGuarded });

  let migrated: Promise<void> | undefined;
  const createInbox = () => migrateInbox(pool, { schema, table });
  /** Resolves once the inbox exists; a failed migration is tried again on the next call. */
  const ready = (): Promise<void> => {
    if (!migrate) return Promise.resolve();
    migrated ??= withTimeout('migration', timeoutMs, createInbox).catch((error: unknown) => {
      migrated = undefined;
      throw error;
    });
    return migrated;
  };

  /** One statement of the store's own under the timeout, the inbox made first if needed. */
  async function query<R extends object>(label: string, statement: Statement, values: unknown[]) {
    await ready();
    return withTimeout(label, timeoutMs, () => pool.query<R & QueryResultRow>({ ...statement, values }));
  }

  const claims = createClaimGroups({
    timeoutMs,
    run: async (group) => {
      const column = <T>(pick: (claim: PendingClaim) => T) => group.map(pick);
      const { rows } = await query<ClaimRow>('claim', sql.claim, [
        column((claim) => claim.key),
        column((claim) => claim.request.owner),
        column((claim) => claim.request.leaseMs),
        column((claim) => claim.request.payload),
        column((claim) => claim.request.businessId),
        retentionMs,
      ]);
      return rows;
    },
  });

  const transactions = createTransactionRunner({
    pool,
    opening: committer.opening,
    opened: committer.opened,
    commitDone: (client, key, owner, order) => committer.commitDone(client, retentionMs, key, owner, order),
    timeoutMs,
    ready,
  });

  return {
    pool,
    table: name,
    leaseMs: options.leaseMs,
    migrate: createInbox,
    order: createPostgresOrder({
      statements: orderSql,
      retentionMs,
      query,
      ahead: transactions.ahead,
      ready,
    }),
    runInTransaction: transactions.runInTransaction,

    async claim(key, request) {
      return claimResult(await claims.claim(key, request));
    },

    async renew(key, owner, leaseMs) {
      return (await query('renew', sql.renew, [key, owner, leaseMs])).rowCount === 1;
    },

    async complete(key, owner) {
      return (await query('complete', sql.complete, [key, owner, retentionMs])).rowCount === 1;
    },

    async fail(key, owner, error) {
      return (await query('fail', sql.fail, [key, owner, retentionMs, error])).rowCount === 1;
    },

    async recover(owner, leaseMs, limit) {
      // Records past their retention go a batch at a time, as instances look for lapsed leases.
      await query('purge', sql.purge, []);
      await query('purge', orderSql.purge, []);
      const { rows } = await query<{
        key: string;
        payload: string;
        business_id: string | null;
        attempts: number;
      }>('recover', sql.recover, [owner, leaseMs, limit]);
      return rows.map(
        (row): RecoveredEvent => ({
          key: row.key,
          payload: row.payload,
          businessId: row.business_id ?? '',
          attempts: row.attempts,
        }),
      );
    },

    async get(key) {
      const { rows } = await query<Row>('get', sql.get, [key]);
      const row = rows[0];
      if (!row) return undefined;
      const num = (v: string | null) => (v === null ? undefined : Number(v));
      return {
        key: row.key,
        state: row.state,
        owner: row.owner ?? undefined,
        leaseUntil: num(row.lease_until),
        payload: row.payload ?? undefined,
        businessId: row.business_id ?? undefined,
        attempts: row.attempts,
        error: row.error ?? undefined,
        receivedAt: Number(row.received_at),
        updatedAt: Number(row.updated_at),
      };
    },

    async close() {
      pool.off('error', ignore);
      if (owned && !pool.ended) await pool.end();
    },
  };
}

const ignore = () => {};
