import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ApiError } from '../errors.js';
import type { ApiAnswer } from '../http/act-as.js';
import { databaseUnavailablePage, errorPage } from './account-views.js';
import type { Html } from './html.js';
import type { PageContext } from './layout.js';

/** The fixed texts a redirect's `notice` code shows (a link cannot put other words on a page). */
const NOTICES: Record<string, (count: number) => string> = {
  redelivered: () => 'Redelivered: a new delivery to each registered URL, with its own 48 hours.',
  redelivered_failed: (n) => `Redelivered ${n} failed deliver${n === 1 ? 'y' : 'ies'}.`,
  no_webhook_urls: () => 'No webhook URL is registered: add one under Endpoints, then redeliver.',
  url_added: () => 'Endpoint added: new events it takes are delivered to it.',
  url_removed: () => 'Endpoint removed: new events are no longer delivered to it.',
  endpoint_enabled: () =>
    'Endpoint enabled: its kept deliveries resume, each with a fresh 48 hours. Events made while it was disabled are sent only by Recover, below.',
  endpoint_disabled: () => 'Endpoint disabled: nothing is sent to it; its pending deliveries are kept.',
  recovered: (n) => `Recovery queued ${n} deliver${n === 1 ? 'y' : 'ies'}, each with a fresh 48 hours.`,
  url_present: () => 'That webhook URL is registered already.',
  secret_rotated: () => 'Signing secret rotated: give the new one to your receivers.',
  payment_created: () => 'Test payment session created (payment.session.created).',
  payment_succeeded: () => 'Payment completed: payment.session.succeeded is on its way.',
  payment_failed: () => 'Payment failed: payment.session.failed is on its way.',
};

export const noticeOf = (query: { notice?: string; count?: string }) => {
  const make = query.notice ? NOTICES[query.notice] : undefined;
  return make?.(Number.parseInt(query.count ?? '0', 10) || 0);
};

/** A `datetime-local` value (no zone: read as UTC) as ISO 8601; other text is passed on for the API to refuse. */
export const asUtc = (value: string | undefined) =>
  value ? (/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/.test(value) ? `${value}Z` : value) : undefined;

export type ApiErrorBody = {
  error?: { code: string; message: string; details?: { field: string; message: string }[] };
};

/** A page's refusal of a form: its status and the error it shows. */
export interface Refusal {
  status: number;
  error: ApiErrorBody['error'];
}

/** A refused form (`readForm`'s error) as a page shows it. */
export const refusalOf = (error: ApiError): Refusal => ({
  status: error.status,
  error: error.toJSON().error,
});

/** Sends a page as HTML. */
export function sendPage(reply: FastifyReply, body: Html): FastifyReply {
  return reply.type('text/html; charset=utf-8').send(body.text);
}

/** An API refusal as a page: its status (a 404 for another business's event), its message. */
export function apiRefusal(reply: FastifyReply, status: number, body: ApiErrorBody): FastifyReply {
  if (body.error?.code === 'database_unavailable')
    return sendPage(reply.code(503), databaseUnavailablePage());
  const title = status === 404 ? 'Not found' : 'Refused';
  return sendPage(
    reply.code(status),
    errorPage(status, title, body.error?.message ?? 'The request was refused.', true, body.error?.details),
  );
}

/** The page of a form with values it does not offer (`readForm`'s error): its status, each field's problem. */
export function formRefusal(reply: FastifyReply, error: ApiError): FastifyReply {
  return apiRefusal(reply, error.status, error.toJSON());
}

/**
 * True unless the request names another origin: browsers send `Origin` on every POST (and
 * `Referer` when they do not), so a form posted from another site is refused even before its
 * token is checked. A client that sends neither (a script) still needs the CSRF token.
 */
export function sameOrigin(request: FastifyRequest): boolean {
  const origin = request.headers.origin ?? request.headers.referer;
  if (!origin || origin === 'null') return origin !== 'null';
  try {
    return new URL(origin).host === request.host;
  } catch {
    return false;
  }
}

/** What the pages' routes share: the session check, API calls as the signed-in business, the page context. */
export interface PageTools {
  signedIn: (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
  call: <T>(
    request: FastifyRequest,
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    url: string,
    payload?: unknown,
  ) => Promise<ApiAnswer<T & ApiErrorBody>>;
  context: (request: FastifyRequest, section: PageContext['section']) => PageContext;
}
