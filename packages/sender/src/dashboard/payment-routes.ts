import type { FastifyInstance } from 'fastify';
import { SandboxOutcome } from '../http/sandbox.js';
import { sampleSession } from '../payments/sample-session.js';
import { type PaymentView, paymentsPage } from './account-views.js';
import { choice, type Form, integer, optional, readForm, text } from './form.js';
import { apiRefusal, formRefusal, noticeOf, type PageTools, sendPage } from './pages.js';

/** The payments view (test mode): the sandbox's sessions, made and completed through the API. */
export function paymentPages(app: FastifyInstance, { signedIn, call, context }: PageTools): void {
  app.get<{ Querystring: { after?: string; before?: string; notice?: string } }>(
    '/payments',
    { preHandler: signedIn },
    async (request, reply) => {
      const query = new URLSearchParams({ limit: '25' });
      if (request.query.after) query.set('after', request.query.after);
      if (request.query.before) query.set('before', request.query.before);
      const answer = await call<{ data: PaymentView[]; pagination: { after: string; before: string } }>(
        request,
        'GET',
        `/payments?${query}`,
      );
      if (answer.status !== 200) return apiRefusal(reply, answer.status, answer.body);
      return sendPage(
        reply,
        paymentsPage(context(request, '/dashboard/payments'), {
          payments: answer.body.data,
          pagination: answer.body.pagination,
          notice: noticeOf(request.query),
        }),
      );
    },
  );
  app.post<{ Body: Form }>('/payments', { preHandler: signedIn }, async (request, reply) => {
    // The amount's range and the description's length are the payments API's to check.
    const read = readForm(request.body, { amount: integer(), description: optional(text()) });
    if (!read.ok) return formRefusal(reply, read.error);
    const answer = await call(
      request,
      'POST',
      '/payment-sessions',
      sampleSession({ ...read.values, source: 'dashboard' }),
    );
    if (answer.status !== 200 && answer.status !== 201) return apiRefusal(reply, answer.status, answer.body);
    return reply.redirect('/dashboard/payments?notice=payment_created', 303);
  });
  app.post<{ Params: { id: string }; Body: Form }>(
    '/payments/:id/complete',
    { preHandler: signedIn },
    async (request, reply) => {
      const id = encodeURIComponent(request.params.id);
      const read = readForm(request.body, { outcome: choice(SandboxOutcome) });
      if (!read.ok) return formRefusal(reply, read.error);
      const { outcome } = read.values;
      // The payer's step first (a capture; one already made is refused and changes nothing), then the sandbox's outcome.
      await call(request, 'POST', `/payment-sessions/${id}`);
      const answer = await call(request, 'POST', `/sandbox/payment-sessions/${id}/complete`, { outcome });
      if (answer.status !== 200) return apiRefusal(reply, answer.status, answer.body);
      return reply.redirect(`/dashboard/payments?notice=payment_${outcome}`, 303);
    },
  );
}
