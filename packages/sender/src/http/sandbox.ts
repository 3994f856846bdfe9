import type { FastifyPluginAsync } from 'fastify';
import type { Transaction } from 'kysely';
import { Type } from 'typebox';
import type { Database } from '../db/database.js';
import type { Schema } from '../db/schema.js';
import { ApiError } from '../errors.js';
import type { Payment } from '../payments/payment.js';
import {
  failSession,
  lockSession,
  receiveFunds,
  type SessionRow,
  settleSession,
} from '../payments/session-state.js';
import { expireSession } from '../sweeper.js';
import { idempotentWrite, storedTransaction } from './idempotency.js';
import { envelope, SessionEnvelopeSchema } from './payments.js';

const Answer = { 200: Type.Object({ data: SessionEnvelopeSchema }) };
// These routes take no body; an empty JSON object (or none at all) is accepted.
const NoBody = Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()]);

/** The answer of a sandbox route: the payment as it now is, with its session's capture. */
const answer = (payment: Payment, row: SessionRow, expiresAt = new Date(row.expires_at)) => ({
  data: envelope(payment, expiresAt, { auth_type: row.auth_type, links: row.links }),
});

/** A sandbox completion's outcome: the customer pays, or their payment fails. */
export const SandboxOutcome = Type.Union([Type.Literal('succeeded'), Type.Literal('failed')]);

/**
 * The sandbox's API, for test-mode keys only (to a live key these routes do not exist: 404, before
 * the body is even read). They play the customer's side of a payment:
 * - `POST /sandbox/payment-sessions/{id}/complete` with `{"outcome": "succeeded" | "failed"}`: the
 *   customer of a captured session pays (the payment becomes `captured`, funds received, and then
 *   `settled`, with `payment.session.succeeded`; `"settle": false` stops at `captured`) or their
 *   payment fails (`failed`, `cancellation_reason: "payment_failed"`).
 * - `POST /sandbox/payment-sessions/{id}/settle`: credits a `captured` payment to the business.
 * - `POST /sandbox/payment-sessions/{id}/expire`: moves a pending session's clock to its
 *   `expires_at`, and fails it as the sweeper would (`cancellation_reason: "expired"`).
 */
export const sandboxRoutes: FastifyPluginAsync<{ database: Database }> = async (app, { database }) => {
  const { db } = database;

  app.addHook('onRequest', async (request) => {
    if (request.principal?.mode !== 'test') {
      throw new ApiError('not_found', `No route ${request.method} ${request.url.split('?')[0]}.`);
    }
  });

  app.post<{ Params: { payment_id: string }; Body: { outcome: 'succeeded' | 'failed'; settle?: boolean } }>(
    '/sandbox/payment-sessions/:payment_id/complete',
    {
      schema: {
        operationId: 'completeSandboxPayment',
        summary: 'Sandbox: the customer pays, or their payment fails (test keys only)',
        body: Type.Object(
          {
            outcome: SandboxOutcome,
            settle: Type.Optional(
              Type.Boolean({
                description:
                  'After a succeeded outcome, settle the payment too (default true); false leaves it captured.',
              }),
            ),
          },
          { additionalProperties: true },
        ),
        response: Answer,
      },
    },
    async (request, reply) => {
      const { businessId, mode } = request.principal;
      const { outcome, settle = true } = request.body;
      // The response is stored under the Idempotency-Key in the transaction that makes the last
      // change: the first one when it is also the last (a failure, or settle: false).
      const first = await storedTransaction(db, request, reply, async (tx, store) => {
        const row = await lockSession(tx, request.params.payment_id, businessId, mode);
        if (row.captured_at === null)
          throw new ApiError('not_captured', 'Capture the session before completing it.');
        if (row.status !== 'pending')
          throw new ApiError('invalid_state', `The payment is ${row.status} already.`);
        const payment =
          outcome === 'failed' ? await failSession(tx, row, 'payment_failed') : await receiveFunds(tx, row);
        if (payment.status !== 'captured' || !settle) {
          return { response: await store(200, answer(payment, row)) };
        }
        return { row };
      });
      if ('response' in first) return first.response;
      // Funds received is committed on its own, so `captured` is a state a reader can meet; then
      // the payment is credited to the business in a second transaction, with its event.
      return idempotentWrite(db, request, reply, 200, async (tx) => {
        const row = await lockSession(tx, first.row.id, businessId, mode);
        // Settled meanwhile by the settle route: answer the payment as it is.
        return answer(row.status === 'captured' ? await settleSession(tx, row) : (row.data as Payment), row);
      });
    },
  );

  /**
   * A sandbox route that moves a session of one status (`from`, else 409 saying `why`) with
   * `step`, in one transaction whose answer is stored under the Idempotency-Key.
   */
  const sandboxStep = (
    action: string,
    schema: { operationId: string; summary: string },
    from: string,
    why: string,
    step: (tx: Transaction<Schema>, row: SessionRow) => Promise<ReturnType<typeof answer>>,
  ) =>
    app.post<{ Params: { payment_id: string } }>(
      `/sandbox/payment-sessions/:payment_id/${action}`,
      { schema: { ...schema, body: NoBody, response: Answer } },
      async (request, reply) => {
        const { businessId, mode } = request.principal;
        return idempotentWrite(db, request, reply, 200, async (tx) => {
          const row = await lockSession(tx, request.params.payment_id, businessId, mode);
          if (row.status !== from)
            throw new ApiError('invalid_state', `The payment is ${row.status}; ${why}.`);
          return step(tx, row);
        });
      },
    );

  sandboxStep(
    'settle',
    {
      operationId: 'settleSandboxPayment',
      summary: 'Sandbox: credit a captured payment to the business (test keys only)',
    },
    'captured',
    'only a captured payment (funds received) can be settled',
    async (tx, row) => answer(await settleSession(tx, row), row),
  );

  sandboxStep(
    'expire',
    {
      operationId: 'expireSandboxSession',
      summary: "Sandbox: move a pending session's clock past expires_at (test keys only)",
    },
    'pending',
    'only a pending session can expire',
    async (tx, row) => {
      const now = new Date();
      const expiresAt = new Date(row.expires_at) < now ? new Date(row.expires_at) : now;
      await tx.updateTable('payments').set({ expires_at: expiresAt }).where('id', '=', row.id).execute();
      return answer(await expireSession(tx, row), row, expiresAt);
    },
  );
};
