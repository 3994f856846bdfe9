import { createHash } from 'node:crypto';
import { canonicalJson } from '@payhook/core';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Database } from '../db/database.js';
import { ApiError } from './errors.js';

const RETENTION_MS = 24 * 60 * 60 * 1000;
const KEY = /^[\x21-\x7e]{1,255}$/;

declare module 'fastify' {
  interface FastifyRequest {
    /** The Idempotency-Key this request claimed, whose response is to be stored. */
    idempotencyKey?: string;
  }
}

function requestHash(request: FastifyRequest): string {
  const body = request.body === undefined ? '' : canonicalJson(request.body);
  return createHash('sha256')
    .update(`${request.method} ${request.url.split('?')[0]}\n${body}`)
    .digest('hex');
}

/**
 * `Idempotency-Key` on POST (DESIGN.md): the first response is stored for 24 hours and replayed
 * to a retry; the same key with a different request is 422; a retry while the first request is
 * still running is 409. Server errors are not stored, so a retry runs again.
 */
export function idempotency(app: FastifyInstance, database: Database): void {
  const { db } = database;

  app.addHook('preHandler', async (request, reply) => {
    const key = request.headers['idempotency-key'];
    if (request.method !== 'POST' || key === undefined || !request.principal) return;
    if (typeof key !== 'string' || !KEY.test(key)) {
      throw new ApiError(400, 'invalid_request', 'Idempotency-Key is 1 to 255 visible ASCII characters.', [
        { field: 'Idempotency-Key', message: 'is not a valid key' },
      ]);
    }
    const { businessId, mode } = request.principal;
    const hash = requestHash(request);
    // Keys past their 24 hours are forgotten, so they can be used again.
    await db
      .deleteFrom('idempotency_keys')
      .where('business_id', '=', businessId)
      .where('mode', '=', mode)
      .where('key', '=', key)
      .where('created_at', '<', new Date(Date.now() - RETENTION_MS))
      .execute();
    const inserted = await db
      .insertInto('idempotency_keys')
      .values({ business_id: businessId, mode, key, request_hash: hash })
      .onConflict((oc) => oc.doNothing())
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
        422,
        'idempotency_key_reused',
        'This Idempotency-Key was used with a different request; use a new key.',
      );
    }
    if (stored.response_status === null) {
      throw new ApiError(
        409,
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
    const { businessId, mode } = request.principal;
    const where = db
      .updateTable('idempotency_keys')
      .where('business_id', '=', businessId)
      .where('mode', '=', mode)
      .where('key', '=', key);
    if (reply.statusCode >= 500) {
      await db
        .deleteFrom('idempotency_keys')
        .where('business_id', '=', businessId)
        .where('mode', '=', mode)
        .where('key', '=', key)
        .execute();
    } else {
      await where.set({ response_status: reply.statusCode, response_body: String(payload) }).execute();
    }
    return payload;
  });
}
