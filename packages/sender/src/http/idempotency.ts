import { createHash } from 'node:crypto';
import { canonicalJson } from '@payhook/core';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type Kysely, sql, type Transaction } from 'kysely';
import type { Database } from '../db/database.js';
import { isDatabaseUnavailable } from '../db/health.js';
import type { Schema } from '../db/schema.js';
import { ApiError } from '../errors.js';

const RETENTION_MS = 24 * 60 * 60 * 1000;
/**
 * A key still marked in progress after this long belongs to a request that will never finish (its
 * process crashed or was killed between claiming the key and storing the response): the next
 * request with that key takes it over. Far longer than any request runs.
 */
export const ABANDONED_AFTER_SECONDS = 60;
const KEY = /^[\x21-\x7e]{1,255}$/;

declare module 'fastify' {
  interface FastifyRequest {
    /** The Idempotency-Key this request claimed, whose response is to be stored. */
    idempotencyKey?: string;
    /** The status of the response already stored under that key by a committed write (see `responseUpdate`). */
    idempotencyStored?: number;
  }
}

/** What identifies a request under its key: SHA-256 of the method, the path and the canonical body. */
export function requestHash(method: string, url: string, body: unknown): string {
  const text = body === undefined ? '' : canonicalJson(body);
  return createHash('sha256')
    .update(`${method} ${url.split('?')[0]}\n${text}`)
    .digest('hex');
}

/**
 * `Idempotency-Key` on POST: the first response is stored for 24 hours and replayed
 * to a retry; the same key with a different request is 422; a retry while the first request is
 * still running is 409, unless the first has been running for longer than
 * `ABANDONED_AFTER_SECONDS`: then it died, and the retry takes the key over and runs. Server
 * errors are not stored, so a retry runs again.
 */
export function idempotency(app: FastifyInstance, database: Database): void {
  const { db } = database;

  app.addHook('preHandler', async (request, reply) => {
    const key = request.headers['idempotency-key'];
    if (request.method !== 'POST' || key === undefined || !request.principal) return;
    if (typeof key !== 'string' || !KEY.test(key)) {
      throw new ApiError('invalid_request', 'Idempotency-Key is 1 to 255 visible ASCII characters.', {
        details: [{ field: 'Idempotency-Key', message: 'is not a valid key' }],
      });
    }
    const { businessId, mode } = request.principal;
    const hash = requestHash(request.method, request.url, request.body);
    // Claims the key, in one statement; a key past its 24 hours is forgotten, so it is claimed
    // anew (as if deleted, then inserted): fresh hash, no response, a new start time.
    const inserted = await db
      .insertInto('idempotency_keys')
      .values({ business_id: businessId, mode, key, request_hash: hash })
      .onConflict((oc) =>
        oc
          .columns(['business_id', 'mode', 'key'])
          .doUpdateSet({
            request_hash: hash,
            response_status: null,
            response_body: null,
            created_at: sql<Date>`clock_timestamp()`,
          })
          .where('idempotency_keys.created_at', '<', new Date(Date.now() - RETENTION_MS)),
      )
      .returning('key')
      .executeTakeFirst();
    if (inserted) {
      request.idempotencyKey = key;
      return;
    }
    const stored = await db
      .selectFrom('idempotency_keys')
      .select(['request_hash', 'response_status', 'response_body'])
      .where('business_id', '=', businessId)
      .where('mode', '=', mode)
      .where('key', '=', key)
      .executeTakeFirstOrThrow();
    if (stored.request_hash !== hash) {
      throw new ApiError(
        'idempotency_key_reused',
        'This Idempotency-Key was used with a different request; use a new key.',
      );
    }
    if (stored.response_status === null) {
      // Abandoned by a request that died mid-way: taken over (by one retry only, the update is
      // conditional), with a new start time. Timed by the database's clock, which wrote created_at.
      const taken = await db
        .updateTable('idempotency_keys')
        .set({ created_at: sql<Date>`clock_timestamp()` })
        .where('business_id', '=', businessId)
        .where('mode', '=', mode)
        .where('key', '=', key)
        .where('response_status', 'is', null)
        .where(
          'created_at',
          '<',
          sql<Date>`clock_timestamp() - make_interval(secs => ${sql.lit(ABANDONED_AFTER_SECONDS)})`,
        )
        .returning('key')
        .executeTakeFirst();
      if (taken) {
        request.idempotencyKey = key;
        return;
      }
      throw new ApiError(
        'idempotency_in_progress',
        'A request with this Idempotency-Key is still running; retry in a moment.',
      );
    }
    reply
      .header('idempotent-replayed', 'true')
      .code(stored.response_status)
      .type('application/json')
      .send(stored.response_body);
    return reply;
  });

  app.addHook('onSend', async (request, reply, payload) => {
    const key = request.idempotencyKey;
    if (key === undefined) return payload;
    // Stored by the request's own statement, which committed: these very bytes (see responseUpdate).
    if (request.idempotencyStored === reply.statusCode) return payload;
    const { businessId, mode } = request.principal;
    const where = db
      .updateTable('idempotency_keys')
      .where('business_id', '=', businessId)
      .where('mode', '=', mode)
      .where('key', '=', key);
    // The answer goes out even when this write cannot be made (the database away: the 503 being
    // sent): the key then stays claimed until it counts as abandoned, and a retry takes it over.
    const write =
      reply.statusCode >= 500
        ? db
            .deleteFrom('idempotency_keys')
            .where('business_id', '=', businessId)
            .where('mode', '=', mode)
            .where('key', '=', key)
            .execute()
        : where.set({ response_status: reply.statusCode, response_body: String(payload) }).execute();
    await write.catch((error: unknown) => {
      if (!isDatabaseUnavailable(error)) throw error;
    });
    return payload;
  });
}

/**
 * Stores a response under the request's Idempotency-Key in the caller's transaction, so that a
 * process dying after the commit and before the response is stored (the `onSend` hook stores it
 * again, the same bytes) still leaves the key replaying it, rather than running the request a
 * second time. Sets the reply's status. Does nothing for a request without a key.
 *
 * @example
 * ```ts
 * await db.transaction().execute(async (tx) => {
 *   // ... the state change ...
 *   const response = { data };
 *   await storeResponse(tx, request, reply, 201, response);
 *   return response;
 * });
 * ```
 */
export async function storeResponse(
  tx: Transaction<Schema> | Kysely<Schema>,
  request: FastifyRequest,
  reply: FastifyReply,
  status: number,
  response: unknown,
): Promise<void> {
  await responseUpdate(tx, request, reply, status, response)?.execute();
}

/**
 * The UPDATE that stores a response under the request's Idempotency-Key (what `storeResponse`
 * runs), for a caller that runs it inside its own statement, as a data-modifying CTE of the write
 * it answers (see `eventWrite`). Sets the reply's status; `undefined` for a request without a
 * key. Once that statement has committed, `responseStored` spares the `onSend` hook storing the
 * same bytes again.
 *
 * @example
 * ```ts
 * const update = responseUpdate(db, request, reply, 201, response);
 * await db.executeQuery(eventWrite(db, event, [insert, ...(update ? [update] : [])]).statement);
 * if (update) responseStored(request, 201);
 * ```
 */
export function responseUpdate(
  db: Transaction<Schema> | Kysely<Schema>,
  request: FastifyRequest,
  reply: FastifyReply,
  status: number,
  response: unknown,
) {
  reply.code(status);
  const key = request.idempotencyKey;
  if (key === undefined) return undefined;
  const { businessId, mode } = request.principal;
  return db
    .updateTable('idempotency_keys')
    .set({ response_status: status, response_body: String(reply.serialize(response)) })
    .where('business_id', '=', businessId)
    .where('mode', '=', mode)
    .where('key', '=', key);
}

/** Records that the response of `status` is stored under the request's key by a committed write. */
export function responseStored(request: FastifyRequest, status: number): void {
  if (request.idempotencyKey !== undefined) request.idempotencyStored = status;
}

/** Stores `response` under the request's Idempotency-Key as the answer of `status`, in the write's transaction. */
export type StoreAnswer = <T>(status: number, response: T) => Promise<T>;

/** Stores `response` under the request's Idempotency-Key as the answer of `status`, in `tx`. */
export type StoreAnswerIn = <T>(tx: Transaction<Schema>, status: number, response: T) => Promise<T>;

/**
 * Runs `work`, which stores its answer with `store(tx, status, response)` in the transaction that
 * makes its last change (or does not, when nothing it changed is to be replayed). Once `work` has
 * resolved, that transaction committed: the stored status is recorded, so that the `onSend` hook
 * does not store the same bytes again. `work` rejecting records nothing. A process dying after
 * the commit leaves the key replaying the answer, rather than running the request a second time.
 *
 * @example
 * ```ts
 * const { queued } = await storingAnswer(request, reply, (store) =>
 *   recoverEndpoint(db, endpoint, window, { onDone: (tx, r) => store(tx, 202, answer(r.queued)) }),
 * );
 * ```
 */
export async function storingAnswer<T>(
  request: FastifyRequest,
  reply: FastifyReply,
  work: (store: StoreAnswerIn) => Promise<T>,
): Promise<T> {
  let stored: number | undefined;
  const result = await work(async (tx, status, response) => {
    await storeResponse(tx, request, reply, status, response);
    stored = status;
    return response;
  });
  if (stored !== undefined) responseStored(request, stored);
  return result;
}

/**
 * {@link storingAnswer} for a write of one transaction: `work` calls `store(status, response)`
 * for the outcome it answers, stored in that transaction's commit; a rolled-back transaction
 * records nothing.
 *
 * @example
 * ```ts
 * const result = await storedTransaction(db, request, reply, async (tx, store) => {
 *   if (expired) { await expire(tx); await store(409, error.toJSON()); return 'expired' as const; }
 *   return store(200, { data: await capture(tx) });
 * });
 * ```
 */
export function storedTransaction<T>(
  db: Kysely<Schema>,
  request: FastifyRequest,
  reply: FastifyReply,
  work: (tx: Transaction<Schema>, store: StoreAnswer) => Promise<T>,
): Promise<T> {
  return storingAnswer(request, reply, (store) =>
    db.transaction().execute((tx) => work(tx, (status, response) => store(tx, status, response))),
  );
}

/**
 * The idempotent write of a POST route: `write` makes its change in a transaction and returns
 * the response, which is stored under the request's Idempotency-Key in the same commit and
 * answered with `status` (see {@link storedTransaction}).
 *
 * @example
 * ```ts
 * return idempotentWrite(db, request, reply, 201, async (tx) => ({ data: await insertCustomer(tx, body) }));
 * ```
 */
export function idempotentWrite<T>(
  db: Kysely<Schema>,
  request: FastifyRequest,
  reply: FastifyReply,
  status: number,
  write: (tx: Transaction<Schema>) => Promise<T>,
): Promise<T> {
  return storedTransaction(db, request, reply, async (tx, store) => store(status, await write(tx)));
}
