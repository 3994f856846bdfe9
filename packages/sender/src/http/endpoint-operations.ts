import type { FastifyPluginAsync } from 'fastify';
import { type Static, Type } from 'typebox';
import type { SenderConfig } from '../config.js';
import type { Database } from '../db/database.js';
import { endpointBuckets } from '../delivery/attempt-counts.js';
import { retentionHorizon } from '../delivery/retention.js';
import { type DisableRule, endpointFailures, type FailureView } from '../endpoints/health.js';
import { RECOVER_MAX_DAYS, recoverEndpoint } from '../endpoints/lifecycle.js';
import { getEndpoint } from '../endpoints/store.js';
import { ApiError } from '../errors.js';
import { isoMicros } from '../timestamps.js';
import { storingAnswer } from './idempotency.js';

const RecoverWindow = Type.Object(
  {
    since: Type.String({
      maxLength: 40,
      description: `Events created at or after this time (ISO 8601), at most ${RECOVER_MAX_DAYS} days ago.`,
    }),
    until: Type.Optional(
      Type.String({ maxLength: 40, description: 'Events created before this time (default: now).' }),
    ),
  },
  { additionalProperties: false, title: 'RecoverWindow' },
);

const Recovered = Type.Object(
  {
    endpoint_id: Type.String({ format: 'uuid' }),
    since: Type.String(),
    until: Type.String(),
    queued: Type.Integer({
      description:
        'Deliveries queued, each with its own 48 hours: one per failed or never-attempted delivery (or event never sent) in the window.',
    }),
  },
  { title: 'Recovery' },
);

/** The `failure` field of a webhook endpoint (`endpoints/health.ts`). */
export const EndpointFailure = Type.Union(
  [
    Type.Object(
      {
        failing_since: Type.String({
          format: 'date-time',
          description: 'The first failed attempt since the last one answered 200.',
        }),
        last_failure_at: Type.String({ format: 'date-time' }),
        failed_attempts: Type.Integer({
          description: 'Attempts made since failing_since, every one failed.',
        }),
        period_percent: Type.Integer({ description: 'How much of the failing period has passed, 0 to 100.' }),
        warning: Type.Union([Type.Literal(50), Type.Literal(75), Type.Literal(90), Type.Null()], {
          description: '50, 75 or 90 once that share of the period has passed.',
        }),
        disables_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
          description:
            'When the endpoint is disabled (disabled_reason "failing") unless an attempt succeeds first; later while it has fewer failed attempts than the minimum; null when the service never disables.',
        }),
      },
      { title: 'WebhookEndpointFailure' },
    ),
    Type.Null(),
  ],
  {
    description:
      'Set while every attempt to the endpoint fails: a failing endpoint is warned about at 50, 75 and 90 % of the period (5 days by default), then disabled. Null once an attempt succeeds.',
  },
);

/** The rule that disables failing endpoints, from the configuration. */
export const disableRule = (config: SenderConfig): DisableRule => ({
  afterMs: config.endpointDisable.afterSeconds * 1000,
  minAttempts: config.endpointDisable.minAttempts,
});

/** `views` with the `failure` field of each (see {@link EndpointFailure}). */
export async function withFailures<T extends { id: string }>(
  database: Database,
  config: SenderConfig,
  views: readonly T[],
  now: Date,
): Promise<(T & { failure: FailureView | null })[]> {
  const failures = await endpointFailures(
    database,
    views.map((v) => v.id),
    disableRule(config),
    now,
  );
  return views.map((v) => ({ ...v, failure: failures.get(v.id) ?? null }));
}

/** The windows of `GET /webhook-endpoints/{id}/stats`: their length and their buckets', in hours. */
export const STATS_WINDOWS = {
  '24h': { hours: 24, bucketHours: 1 },
  '7d': { hours: 168, bucketHours: 6 },
} as const;

const StatsQuery = Type.Object(
  {
    window: Type.Optional(
      Type.Union([Type.Literal('24h'), Type.Literal('7d')], {
        description: '24h: hourly buckets (the default); 7d: six-hour buckets.',
      }),
    ),
  },
  { additionalProperties: false },
);

const Stats = Type.Object(
  {
    endpoint_id: Type.String({ format: 'uuid' }),
    window: Type.String(),
    bucket_seconds: Type.Integer(),
    buckets: Type.Array(
      Type.Object({
        start: Type.String({ format: 'date-time' }),
        attempts: Type.Integer(),
        succeeded: Type.Integer({ description: 'Attempts answered 200.' }),
        p50_latency_ms: Type.Union([Type.Integer(), Type.Null()], {
          description:
            'Their median latency, read from a histogram of the attempts (within a third of the exact one).',
        }),
      }),
      { description: 'Oldest first; every bucket of the window, those without an attempt included.' },
    ),
  },
  { title: 'WebhookEndpointStats' },
);

/** How often a long recovery logs its progress. */
const PROGRESS_EVERY_MS = 5000;

/** 422 `validation_failed` naming `field`. */
const invalid = (field: string, message: string) =>
  new ApiError('validation_failed', 'The request has invalid fields.', { details: [{ field, message }] });

/** An ISO 8601 time of the body, or 422 naming `field`. */
function readTime(value: string, field: string): Date {
  const time = /^\d{4}-\d{2}-\d{2}T/.test(value) ? new Date(value) : new Date(Number.NaN);
  if (Number.isNaN(time.getTime()) || time.getUTCFullYear() < 1) {
    throw invalid(field, 'must be an ISO 8601 timestamp, such as 2026-01-31T12:00:00Z');
  }
  return time;
}

/**
 * `POST /webhook-endpoints/{id}/recover` `{ since, until? }`: sends the endpoint again every failed
 * or never-attempted delivery of the events created in the window (at most
 * {@link RECOVER_MAX_DAYS} days back) that its filter takes, each with its own 48 hours, and
 * answers how many it queued (`delivery/recover.ts`). `GET /webhook-endpoints/{id}/stats`: its
 * attempts, success rate and median latency per bucket over the last 24 hours or 7 days (the
 * dashboard's charts). Another business's endpoint is 404.
 */
export const endpointOperationRoutes: FastifyPluginAsync<{
  database: Database;
  /** Days events are kept (`PAYHOOK_RETENTION_DAYS`); null for ever. */
  retentionDays?: number | null;
  now?: () => Date;
}> = async (app, { database, retentionDays = null, now = () => new Date() }) => {
  app.post<{ Params: { id: string }; Body: Static<typeof RecoverWindow> }>(
    '/webhook-endpoints/:id/recover',
    {
      schema: {
        summary: "Recover a window of an endpoint's failed deliveries",
        operationId: 'recoverWebhookEndpoint',
        description: `Sends again, to this endpoint, every event created in the window (at most ${RECOVER_MAX_DAYS} days back) whose delivery to it failed or was never attempted and that its enabled_events take, each as a delivery with its own 48 hours. An event delivered to it, or still being tried, is never sent again. A disabled endpoint keeps what is queued until it is enabled. Answers how many deliveries were queued.`,
        body: RecoverWindow,
        response: { 202: Type.Object({ data: Recovered }) },
      },
    },
    async (request, reply) => {
      const owner = request.principal;
      const at = now();
      const since = readTime(request.body.since, 'since');
      const until = request.body.until === undefined ? at : readTime(request.body.until, 'until');
      const earliest = new Date(at.getTime() - RECOVER_MAX_DAYS * 86_400_000);
      if (since < earliest) {
        throw invalid(
          'since',
          `must be at most ${RECOVER_MAX_DAYS} days ago (not before ${isoMicros(earliest)})`,
        );
      }
      const horizon = retentionHorizon(retentionDays, at);
      if (horizon && since < horizon) {
        throw invalid(
          'since',
          `is past retention: events are kept ${retentionDays} days (PAYHOOK_RETENTION_DAYS), none created before ${isoMicros(horizon)} is left to recover`,
        );
      }
      if (until <= since) throw invalid('until', 'must be after since');
      const endpoint = await getEndpoint(database.db, owner, request.params.id);
      let reported = Date.now();
      const onProgress = (progress: { rows: number; queued: number }) => {
        // A long recovery says how far it has gone, every few seconds.
        if (Date.now() - reported < PROGRESS_EVERY_MS) return;
        reported = Date.now();
        request.log.info(
          { endpoint: endpoint.id, rows: progress.rows, queued: progress.queued },
          'recovering',
        );
      };
      const window = { since, until, now: at };
      const answer = (queued: number) => ({
        data: { endpoint_id: endpoint.id, since: isoMicros(since), until: isoMicros(until), queued },
      });
      // The response is stored in the transaction of the last batch: a retry after it committed
      // replays it.
      const { queued } = await storingAnswer(request, reply, (store) =>
        recoverEndpoint(database.db, endpoint, window, {
          onProgress,
          onDone: async (tx, recovery) => {
            await store(tx, 202, answer(recovery.queued));
          },
        }),
      );
      return answer(queued);
    },
  );

  app.get<{ Params: { id: string }; Querystring: Static<typeof StatsQuery> }>(
    '/webhook-endpoints/:id/stats',
    {
      schema: {
        summary: "An endpoint's attempts over the last 24 hours or 7 days",
        operationId: 'getWebhookEndpointStats',
        description:
          "Per bucket: the attempts made to this endpoint, how many were answered 200, and their median latency: what the dashboard's charts draw. Read from counts kept per endpoint and hour as attempts are recorded.",
        querystring: StatsQuery,
        response: { 200: Type.Object({ data: Stats }) },
      },
    },
    async (request) => {
      const endpoint = await getEndpoint(database.db, request.principal, request.params.id);
      const name = request.query.window ?? '24h';
      const { hours, bucketHours } = STATS_WINDOWS[name];
      const buckets = await endpointBuckets(database.db, endpoint.id, {
        count: hours / bucketHours,
        bucketHours,
        now: now(),
      });
      return {
        data: {
          endpoint_id: endpoint.id,
          window: name,
          bucket_seconds: bucketHours * 3600,
          buckets: buckets.map(({ start, counts }) => ({
            start: isoMicros(start),
            attempts: counts.attempts,
            succeeded: counts.succeeded,
            p50_latency_ms: counts.p50LatencyMs,
          })),
        },
      };
    },
  );
};
