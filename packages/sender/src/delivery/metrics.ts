import { sql } from 'kysely';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Database } from '../db/database.js';
import type { AttemptErrorCode, AttemptOutcome } from './attempt-outcome.js';
import type { UrlConcurrency } from './url-concurrency.js';

/**
 * The `outcome` label of the attempt metrics: a fixed set, so a scrape's series never grow with
 * what receivers answer. `delivered` is a 200; `http_2xx` another 2xx (201, 204: only 200
 * acknowledges); `redirect` a 3xx; `http_429`, `http_4xx` (other 4xx) and `http_5xx` the refusals;
 * `timeout` no complete answer within 15 s; `connect_timeout` no connection within 5 s;
 * `connection_refused`; `dns` a host that does not resolve; `tls` a handshake that failed;
 * `refused_address` a host that resolves to a non-public address; `invalid_url` a URL that cannot be
 * sent to; `other` anything else (a dropped connection, a status outside 200 to 599).
 */
export const ATTEMPT_OUTCOMES = [
  'delivered',
  'http_2xx',
  'redirect',
  'http_4xx',
  'http_429',
  'http_5xx',
  'timeout',
  'connect_timeout',
  'connection_refused',
  'dns',
  'tls',
  'refused_address',
  'invalid_url',
  'other',
] as const;

/** One of {@link ATTEMPT_OUTCOMES}. */
export type AttemptOutcomeLabel = (typeof ATTEMPT_OUTCOMES)[number];

/** The label of each error code; an answer's status decides for `unexpected_status`. */
const LABEL_OF_CODE: Record<Exclude<AttemptErrorCode, 'unexpected_status'>, AttemptOutcomeLabel> = {
  invalid_url: 'invalid_url',
  unsupported_scheme: 'invalid_url',
  credentials_in_url: 'invalid_url',
  unresolvable_host: 'dns',
  non_public_address: 'refused_address',
  connect_timeout: 'connect_timeout',
  timeout: 'timeout',
  connection_refused: 'connection_refused',
  tls_error: 'tls',
  network_error: 'other',
  redirect: 'redirect',
};

/**
 * The metrics label of an attempt's outcome (see {@link ATTEMPT_OUTCOMES}).
 *
 * @example
 * ```ts
 * outcomeLabel({ ok: false, statusCode: 503, latencyMs: 3, responseBody: null,
 *   error: { code: 'unexpected_status', message: '...' } }); // 'http_5xx'
 * ```
 */
export function outcomeLabel(
  outcome: Pick<AttemptOutcome, 'ok' | 'statusCode' | 'error'>,
): AttemptOutcomeLabel {
  if (outcome.ok) return 'delivered';
  const code = outcome.error?.code;
  if (code !== undefined && code !== 'unexpected_status') return LABEL_OF_CODE[code] ?? 'other';
  const status = outcome.statusCode;
  if (status === null) return 'other';
  if (status === 429) return 'http_429';
  if (status >= 200 && status < 300) return 'http_2xx';
  if (status >= 300 && status < 400) return 'redirect';
  if (status >= 400 && status < 500) return 'http_4xx';
  if (status >= 500 && status < 600) return 'http_5xx';
  return 'other';
}

/**
 * Buckets of the latencies from an event's creation, in seconds: 1 ms to the 48 hours of a
 * delivery's window, roughly doubling up to a minute and then at the retry schedule's steps.
 */
export const EVENT_LATENCY_BUCKETS: readonly number[] = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 1800, 3600, 7200,
  18_000, 36_000, 86_400, 172_800,
];

/** The delivery metrics the worker updates and `/metrics` exposes (Prometheus text format). */
export interface DeliveryMetrics {
  registry: Registry;
  /** Attempts by outcome, one of {@link ATTEMPT_OUTCOMES}. */
  attempts: Counter<'outcome'>;
  /** Seconds from the start of an attempt to its outcome, by outcome. */
  attemptDuration: Histogram<'outcome'>;
  /** Seconds from an event's creation to the start of each attempt of each of its deliveries. */
  eventToAttempt: Histogram;
  /** Seconds from an event's creation to the end of a delivery's successful attempt (its 200 read). */
  eventToDelivered: Histogram;
}

/** What {@link observeAttempt} counts of one attempt. */
export interface ObservedAttempt {
  /** When its event was written. */
  eventCreatedAt: Date;
  /** When the attempt started, on the worker's clock. */
  startedAt: Date;
  outcome: AttemptOutcome;
  /** From the start of the attempt to its outcome, in seconds. */
  durationSeconds: number;
}

/**
 * Counts one attempt: the attempts counter and duration by outcome label, the latency from its
 * event's creation to its start and, for a 200, to its end. A clock behind the database's counts
 * as 0, never negative.
 *
 * @example
 * ```ts
 * observeAttempt(metrics, { eventCreatedAt, startedAt, outcome, durationSeconds: 0.012 });
 * ```
 */
export function observeAttempt(metrics: DeliveryMetrics, attempt: ObservedAttempt): void {
  const { outcome, startedAt } = attempt;
  const label = outcomeLabel(outcome);
  metrics.attempts.inc({ outcome: label });
  metrics.attemptDuration.observe({ outcome: label }, attempt.durationSeconds);
  const created = new Date(attempt.eventCreatedAt).getTime();
  if (Number.isNaN(created)) return;
  const start = startedAt.getTime();
  metrics.eventToAttempt.observe(Math.max(0, (start - created) / 1000));
  if (outcome.ok) metrics.eventToDelivered.observe(Math.max(0, (start + outcome.latencyMs - created) / 1000));
}

/**
 * A read of the database that a scrape's gauges share: `read` runs once for all that ask while
 * it runs, and its last answer (`initial` before the first) stands in while the database is away
 * or when the read fails, so a scrape still answers.
 *
 * @example
 * ```ts
 * const sizes = scrapeQuery(database, [], readTableSizes);
 * new Gauge({ name, help, async collect() { for (const size of await sizes()) this.set(size.bytes); } });
 * ```
 */
export function scrapeQuery<T>(database: Database, initial: T, read: () => Promise<T>): () => Promise<T> {
  let running: Promise<T> | undefined;
  let last = initial;
  return () => {
    running ??= (database.health.state === 'down' ? Promise.resolve(last) : read())
      .then(
        (answer) => (last = answer),
        () => last,
      )
      .finally(() => {
        running = undefined;
      });
    return running;
  };
}

/**
 * Creates the delivery metrics in a registry of their own: attempts by outcome, attempt latency,
 * the latency from an event's creation to each attempt and to its delivery, and, read from the database at each scrape, the queue depth (pending and due deliveries) and the
 * age of the oldest due delivery (how far the workers are behind). With `urlConcurrency` (the
 * worker's), each endpoint's current concurrency as well (`payhook_endpoint_concurrency`).
 *
 * @example
 * ```ts
 * const metrics = createDeliveryMetrics(database);
 * app.get('/metrics', async (_, reply) => reply.type(metrics.registry.contentType).send(await metrics.registry.metrics()));
 * ```
 */
export function createDeliveryMetrics(
  database: Database,
  now: () => Date = () => new Date(),
  urlConcurrency?: UrlConcurrency,
): DeliveryMetrics {
  const registry = new Registry();
  const attempts = new Counter({
    name: 'payhook_delivery_attempts_total',
    help: `Delivery attempts, by outcome (${ATTEMPT_OUTCOMES.join(', ')}).`,
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  // Every outcome's series exists from the start, so a rate over it has no gap before the first.
  for (const outcome of ATTEMPT_OUTCOMES) attempts.inc({ outcome }, 0);
  const eventToAttempt = new Histogram({
    name: 'payhook_delivery_event_to_attempt_seconds',
    help: "Time from an event's creation to the start of each delivery attempt of it.",
    buckets: [...EVENT_LATENCY_BUCKETS],
    registers: [registry],
  });
  const eventToDelivered = new Histogram({
    name: 'payhook_delivery_event_to_delivered_seconds',
    help: "Time from an event's creation to the end of each delivery's successful attempt (its 200 read).",
    buckets: [...EVENT_LATENCY_BUCKETS],
    registers: [registry],
  });
  const attemptDuration = new Histogram({
    name: 'payhook_delivery_attempt_duration_seconds',
    help: 'Time from the start of a delivery attempt to its outcome.',
    labelNames: ['outcome'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15],
    registers: [registry],
  });
  // The gauges are read when scraped, so every instance reports the shared queue as it is; the
  // three gauges of one scrape share one query.
  const read = async () =>
    (
      await sql<{ pending: string; due: string; oldest: Date | null }>`
        select count(*)::text as pending,
               count(*) filter (where next_attempt_at <= ${now()})::text as due,
               min(next_attempt_at) filter (where next_attempt_at <= ${now()} and claim_token is null) as oldest
        from deliveries where status = 'pending'`.execute(database.db)
    ).rows[0];
  const queue = scrapeQuery(database, undefined, read);
  new Gauge({
    name: 'payhook_deliveries_pending',
    help: 'Deliveries not yet delivered or failed for good, retries scheduled for later included.',
    registers: [registry],
    async collect() {
      this.set(Number((await queue())?.pending ?? 0));
    },
  });
  new Gauge({
    name: 'payhook_deliveries_due',
    help: 'Deliveries whose next attempt is due now.',
    registers: [registry],
    async collect() {
      this.set(Number((await queue())?.due ?? 0));
    },
  });
  new Gauge({
    name: 'payhook_oldest_due_delivery_age_seconds',
    help: 'How long the oldest due, unclaimed delivery has waited (0 when none is waiting).',
    registers: [registry],
    async collect() {
      const oldest = (await queue())?.oldest;
      this.set(oldest ? Math.max(0, (now().getTime() - new Date(oldest).getTime()) / 1000) : 0);
    },
  });
  if (urlConcurrency) {
    new Gauge({
      name: 'payhook_endpoint_concurrency',
      help: `Attempts this instance lets be sent at once to each webhook endpoint's URL: learnt from its answers, from ${urlConcurrency.bounds.initial} within ${urlConcurrency.bounds.min} to ${urlConcurrency.bounds.max} (endpoints answered lately).`,
      labelNames: ['endpoint'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const { limit, endpointIds } of urlConcurrency.snapshot())
          for (const endpoint of endpointIds) this.set({ endpoint }, limit);
      },
    });
  }
  new Gauge({
    name: 'payhook_database_up',
    help: 'Whether the database answers (1) or the sender answers 503 database_unavailable (0).',
    registers: [registry],
    collect() {
      this.set(database.health.state === 'up' ? 1 : 0);
    },
  });
  return { registry, attempts, attemptDuration, eventToAttempt, eventToDelivered };
}
