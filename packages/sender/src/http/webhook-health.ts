import type { FastifyPluginAsync } from 'fastify';
import { sql } from 'kysely';
import { Type } from 'typebox';
import type { Database } from '../db/database.js';
import { endpointUrls } from '../endpoints/store.js';
import { isoMicros } from '../timestamps.js';

/** The window the success rate and latency are measured over. */
export const HEALTH_WINDOW_HOURS = 24;

/** One URL's health, as `GET /accounts/webhook-health` answers it. */
export const Health = Type.Object(
  {
    url: Type.String(),
    attempts: Type.Integer({ description: `Attempts in the last ${HEALTH_WINDOW_HOURS} hours.` }),
    success_rate: Type.Union([Type.Number(), Type.Null()], {
      description: 'The share of those attempts answered 200 (0 to 1); null with no attempt.',
    }),
    p50_latency_ms: Type.Union([Type.Integer(), Type.Null()], { description: 'Their median latency.' }),
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

interface Totals {
  url: string;
  attempts: string | number;
  ok: string | number;
  p50: string | number | null;
}
interface LastError {
  url: string;
  started_at: Date;
  status_code: number | null;
  error_code: string;
  error_message: string | null;
}
interface Pending {
  url: string;
  pending: string | number;
}

/**
 * `GET /accounts/webhook-health`: for each registered webhook URL, its success rate and median
 * latency over the last 24 hours, its latest error and the deliveries still pending to it (what
 * the dashboard's endpoints view shows).
 */
export const webhookHealthRoutes: FastifyPluginAsync<{ database: Database }> = async (app, { database }) => {
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
      const urls = await endpointUrls(db, { businessId, mode });
      if (urls.length === 0) return { data: [] };
      const since = new Date(Date.now() - HEALTH_WINDOW_HOURS * 3600_000);
      const scope = sql`from delivery_attempts a
        join deliveries d on d.id = a.delivery_id
        join events e on e.id = d.event_id
        where e.business_id = ${businessId} and e.mode = ${mode} and a.started_at >= ${since}
          and a.url in (${sql.join(urls)})`;
      const [totals, errors, pending] = await Promise.all([
        sql<Totals>`select a.url, count(*) as attempts,
            count(*) filter (where a.status_code = 200 and a.error_code is null) as ok,
            percentile_disc(0.5) within group (order by a.latency_ms) as p50
          ${scope} group by a.url`.execute(db),
        sql<LastError>`select distinct on (a.url) a.url, a.started_at, a.status_code, a.error_code, a.error_message
          ${scope} and a.error_code is not null order by a.url, a.started_at desc`.execute(db),
        sql<Pending>`select d.url, count(*) as pending from deliveries d join events e on e.id = d.event_id
          where d.status = 'pending' and e.business_id = ${businessId} and e.mode = ${mode}
            and d.url in (${sql.join(urls)}) group by d.url`.execute(db),
      ]);
      const byUrl = <T extends { url: string }>(rows: T[]) => new Map(rows.map((r) => [r.url, r]));
      const totalOf = byUrl(totals.rows);
      const errorOf = byUrl(errors.rows);
      const pendingOf = byUrl(pending.rows);
      return {
        data: urls.map((url) => {
          const total = totalOf.get(url);
          const attempts = Number(total?.attempts ?? 0);
          const error = errorOf.get(url);
          return {
            url,
            attempts,
            success_rate: attempts === 0 ? null : Number(total?.ok ?? 0) / attempts,
            p50_latency_ms: total?.p50 == null ? null : Number(total.p50),
            pending: Number(pendingOf.get(url)?.pending ?? 0),
            last_error: error
              ? {
                  at: isoMicros(error.started_at),
                  status_code: error.status_code,
                  code: error.error_code,
                  message: error.error_message ?? '',
                }
              : null,
          };
        }),
      };
    },
  );
};
