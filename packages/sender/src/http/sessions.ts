import { randomBytes, randomInt, randomUUID } from 'node:crypto';
import type { FastifyPluginAsync } from 'fastify';
import { Type } from 'typebox';
import type { Database } from '../db/database.js';
import { ApiError } from '../errors.js';
import type { Payment } from '../payments/payment.js';
import { failSession, lockSession } from '../payments/session-state.js';
import { expireSession } from '../sweeper.js';
import { storedTransaction } from './idempotency.js';
import { envelope, SessionEnvelopeSchema } from './payments.js';
import { sandboxRoutes } from './sandbox.js';
import { sandboxPages } from './sandbox-pages.js';

// The sandbox card declined at capture (docs/service-interface.md, "Capturing a session"); any
// other number, 4242424242424242 for one, goes on to 3-D Secure, which the sandbox completion route
// passes.
const CARD_DECLINED = '4000000000000002';

const CaptureBody = Type.Object(
  {
    card: Type.Optional(
      Type.Object(
        {
          number: Type.String({ pattern: '^[0-9]{12,19}$' }),
          expiry_month: Type.Integer({ minimum: 1, maximum: 12 }),
          expiry_year: Type.Integer({ minimum: 2000, maximum: 2100 }),
          cvv: Type.String({ pattern: '^[0-9]{3,4}$' }),
        },
        { additionalProperties: true },
      ),
    ),
  },
  { additionalProperties: true },
);

/**
 * `POST /payment-sessions/{payment_id}` (capture: the payment stays pending and gets the
 * method's account or links), and the sandbox's routes and pages.
 */
export const sessionRoutes: FastifyPluginAsync<{ database: Database }> = async (app, { database }) => {
  const { db } = database;

  app.post<{
    Params: { payment_id: string };
    Body: { card?: { number: string; expiry_month: number; expiry_year: number; cvv: string } };
  }>(
    '/payment-sessions/:payment_id',
    {
      schema: {
        summary: 'Capture a payment session',
        operationId: 'capturePaymentSession',
        body: Type.Union([CaptureBody, Type.Null()]),
        response: { 200: Type.Object({ data: SessionEnvelopeSchema }) },
      },
    },
    async (request, reply) => {
      const { businessId, mode } = request.principal;
      const origin = `${request.protocol}://${request.host}`;
      const card = request.body?.card;
      const expired = new ApiError('session_expired', 'The session expired; create a new one.');
      // Every outcome that changes the payment is stored under the Idempotency-Key in its
      // transaction: a retry after a crash past the commit replays it, rather than meeting a 409.
      const result = await storedTransaction(db, request, reply, async (tx, store) => {
        const row = await lockSession(tx, request.params.payment_id, businessId, mode);
        if (row.status !== 'pending' || row.captured_at !== null) {
          throw new ApiError(
            'invalid_state',
            `The session is ${row.captured_at ? 'captured already' : row.status}; only a new pending session can be captured.`,
          );
        }
        if (new Date(row.expires_at).getTime() <= Date.now()) {
          // Failed and committed (with its event) before the 409 is answered.
          await expireSession(tx, row);
          await store(409, expired.toJSON());
          return 'expired' as const;
        }
        const payment = row.data as Payment;
        const method = row.method_type ?? 'bank_account';
        const sandbox = (kind: string) => `${origin}/sandbox/pay/${row.id}?method=${kind}`;
        let authType: string | null = null;
        let links: Record<string, string> = {};
        let paymentMethod: Payment['payment_method'] = null;
        switch (method) {
          case 'bank_account':
            paymentMethod = {
              id: randomUUID(),
              type: 'bank_account',
              account_name:
                `Payhook Checkout / ${payment.customer.first_name} ${payment.customer.last_name}`.trim(),
              account_number: String(randomInt(1_000_000_000, 9_999_999_999)),
              account_type: 'savings',
              bank_name: 'Payhook Sandbox Bank',
            };
            break;
          case 'etransfer':
            links = { redirect_url: sandbox('etransfer') };
            break;
          case 'wallet':
            links = {
              checkout_url: sandbox('wallet'),
              deeplink: `payhook://pay/${row.id}`,
              payment_url: sandbox('wallet-web'),
              qr_url: `${origin}/sandbox/qr/${row.id}.png`,
            };
            break;
          case 'crypto_address':
            paymentMethod = {
              id: randomUUID(),
              type: 'crypto_address',
              address: `0x${randomBytes(20).toString('hex')}`,
              network: 'ethereum',
            };
            break;
          case 'card': {
            if (!card)
              throw new ApiError('validation_failed', 'A card capture needs the card.', {
                details: [{ field: 'card', message: 'is required for a card payment' }],
              });
            if (card.number === CARD_DECLINED) {
              const failed = await failSession(tx, row, 'card_declined');
              return store(200, { data: envelope(failed, new Date(row.expires_at)) });
            }
            authType = '3ds';
            links = { redirect_url: sandbox('3ds') };
            paymentMethod = {
              id: randomUUID(),
              type: 'card',
              card_number: `${card.number.slice(0, 6)}${'*'.repeat(card.number.length - 10)}${card.number.slice(-4)}`,
              expiry_month: card.expiry_month,
              expiry_year: card.expiry_year,
            };
            break;
          }
        }
        const captured: Payment = { ...payment, payment_method: paymentMethod };
        await tx
          .updateTable('payments')
          .set({
            data: JSON.stringify(captured),
            captured_at: new Date(),
            auth_type: authType,
            links: JSON.stringify(links),
          })
          .where('id', '=', row.id)
          .execute();
        return store(200, {
          data: envelope(captured, new Date(row.expires_at), { auth_type: authType, links }),
        });
      });
      if (result === 'expired') throw expired;
      return result;
    },
  );

  // The sandbox: test-key routes that play the customer's side, and the public pages of capture links.
  await app.register(sandboxRoutes, { database });
  await app.register(sandboxPages, { database });
};
