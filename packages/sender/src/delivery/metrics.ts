import { sql } from 'kysely';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Database } from '../db/database.js';

/** The delivery metrics the worker updates and `/metrics` exposes (Prometheus text format). */
export interface DeliveryMetrics {
  registry: Registry;
  /** Attempts by outcome: `delivered`, or the attempt's error code (`unexpected_status`, `timeout`, ...). */
  attempts: Counter<'outcome'>;
  /** Seconds from the start of an attempt to its outcome. */
  attemptDuration: Histogram<'outcome'>;
}

/**
 * Creates the delivery metrics in a registry of their own: attempts by outcome, attempt latency,
 * and, read from the database at each scrape, the queue depth (pending and due deliveries) and the
 * age of the oldest due delivery (how far the workers are behind).
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
): DeliveryMetrics {
  const registry = new Registry();
  const attempts = new Counter({
    name: 'payhook_delivery_attempts_total',
    help: 'Delivery attempts, by outcome (delivered, or the error code of a failed attempt).',
    labelNames: ['outcome'] as const,
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
  let running: Promise<{ pending: string; due: string; oldest: Date | null } | undefined> | undefined;
  /** The last answer: kept while the database is away, so a scrape still answers. */
  let last: { pending: string; due: string; oldest: Date | null } | undefined;
  const queue = () => {
    running ??= (database.health.state === 'down' ? Promise.resolve(last) : read())
      .then(
        (row) => (last = row),
        () => last,
      )
      .finally(() => {
        running = undefined;
      });
    return running;
  };
  const read = async () =>
    (
      await sql<{ pending: string; due: string; oldest: Date | null }>`
        select count(*)::text as pending,
               count(*) filter (where next_attempt_at <= ${now()})::text as due,
               min(next_attempt_at) filter (where next_attempt_at <= ${now()} and claim_token is null) as oldest
        from deliveries where status = 'pending'`.execute(database.db)
    ).rows[0];
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
  new Gauge({
    name: 'payhook_database_up',
    help: 'Whether the database answers (1) or the sender answers 503 database_unavailable (0).',
    registers: [registry],
    collect() {
      this.set(database.health.state === 'up' ? 1 : 0);
    },
  });
  return { registry, attempts, attemptDuration };
}
