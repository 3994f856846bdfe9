import type { FastifyPluginAsync } from 'fastify';
import { Type } from 'typebox';
import type { Database } from '../db/database.js';
import { endpointTotals } from '../delivery/attempt-counts.js';
import { pendingByEndpoint } from '../endpoints/store.js';
import { isoMicros } from '../timestamps.js';

/** The window the success rate and latency are measured over. */
export const HEALTH_WINDOW_HOURS = 24;

/** One URL's health, as `GET /accounts/webhook-health` answers it. */
export const Health = Type.Object(
  {
    url: Type.String(),
    attempts: Type.Integer({
      description: `Attempts in the last ${HEALTH_WINDOW_HOURS} hours (whole hours, the current one included).`,
    }),
    success_rate: Type.Union([Type.Number(), Type.Null()], {
      description: 'The share of those attempts answered 200 (0 to 1); null with no attempt.',
    }),
    p50_latency_ms: Type.Union([Type.Integer(), Type.Null()], {
      description:
        'Their median latency, read from a histogram of the attempts (within a third of the exact one).',
    }),
    pending: Type.Integer({ description: 'Deliveries to this URL still being tried.' }),
    last_error: Type.Union(
      [
        Type.Object({
          at: Type.String({ format: 'date-time' }),
          status_code: Type.Union([Type.Integer(), Type.Null()]),
          code: Type.String(),
          message: Type.String(),
        }),
        Type.Null(),
      ],
      { description: `The latest failed attempt in the last ${HEALTH_WINDOW_HOURS} hours.` },
    ),
  },
  { title: 'WebhookHealth' },
);

/**
 * `GET /accounts/webhook-health`: for each registered webhook URL, its success rate and median
 * latency over the last 24 hours, its latest error and the deliveries still pending to it (what
 * the dashboard's endpoints view shows). It reads the hourly counts kept as attempts are recorded
 * (`delivery/attempt-counts.ts`) and the pending deliveries by endpoint, never the attempts.
 */
export const webhookHealthRoutes: FastifyPluginAsync<{ database: Database; now?: () => Date }> = async (
  app,
  { database, now = () => new Date() },
) => {
  const { db } = database;
  app.get(
    '/accounts/webhook-health',
    {
      schema: {
        summary: 'The health of each webhook URL over the last 24 hours',
        operationId: 'getWebhookHealth',
        response: { 200: Type.Object({ data: Type.Array(Health) }) },
      },
    },
    async (request) => {
      const { businessId, mode } = request.principal;
      const endpoints = await db
        .selectFrom('webhook_endpoints')
        .select(['id', 'url'])
        .where('business_id', '=', businessId)
        .where('mode', '=', mode)
        .orderBy('created_at')
        .orderBy('id')
        .execute();
      if (endpoints.length === 0) return { data: [] };
      const urlOf = new Map(endpoints.map((e) => [e.id, e.url]));
      const [totals, pending] = await Promise.all([
        endpointTotals(db, urlOf, { hours: HEALTH_WINDOW_HOURS, now: now() }),
        pendingByEndpoint(db, [...urlOf.keys()]),
      ]);
      const pendingOf = new Map<string, number>();
      for (const [id, count] of pending) {
        const url = urlOf.get(id) as string;
        pendingOf.set(url, (pendingOf.get(url) ?? 0) + count);
      }
      return {
        data: endpoints.map(({ url }) => {
          const total = totals.get(url);
          const attempts = total?.attempts ?? 0;
          const error = total?.lastError;
          return {
            url,
            attempts,
            success_rate: attempts === 0 ? null : (total?.succeeded ?? 0) / attempts,
            p50_latency_ms: total?.p50LatencyMs ?? null,
            pending: pendingOf.get(url) ?? 0,
            last_error: error
              ? {
                  at: isoMicros(error.at),
                  status_code: error.statusCode,
                  code: error.code,
                  message: error.message,
                }
              : null,
          };
        }),
      };
    },
  );
};
