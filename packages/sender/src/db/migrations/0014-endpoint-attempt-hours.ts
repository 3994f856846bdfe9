import { type Kysely, type Migration, sql } from 'kysely';
import { attemptHoursSql, HISTOGRAM_BUCKETS } from '../attempt-hours.js';

/** Migration 0014_endpoint_attempt_hours, as it shipped: never edit it, add the next. */
export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // Each endpoint's attempts per hour, kept by the attempt-record statement: what the charts
    // and the health of endpoints read, at a cost that does not grow with traffic
    // (docs/decisions.md, "Counts kept as attempts are recorded"). No foreign key, as for
    // endpoint_failures: recording must never fail on an endpoint deleted meanwhile.
    await db.schema
      .createTable('endpoint_attempt_hours')
      .addColumn('endpoint_id', 'uuid', (c) => c.notNull())
      .addColumn('hour', 'timestamptz', (c) => c.notNull())
      .addColumn('attempts', 'integer', (c) => c.notNull())
      .addColumn('succeeded', 'integer', (c) => c.notNull())
      .addColumn('latency_histogram', sql`integer[]`, (c) =>
        c.notNull().check(sql`cardinality(latency_histogram) = ${sql.lit(HISTOGRAM_BUCKETS)}`),
      )
      .addColumn('last_error_at', 'timestamptz')
      .addColumn('last_error_status', 'integer')
      .addColumn('last_error_code', 'text')
      .addColumn('last_error_message', 'text')
      .addPrimaryKeyConstraint('endpoint_attempt_hours_pkey', ['endpoint_id', 'hour'])
      .execute();
    // The last 8 days of attempts already recorded, the longest window a chart shows: read
    // once, by the attempts' time, with no lock on the tables delivery writes. Deliveries older
    // than endpoints (no endpoint_id) count for the business's endpoints of the same URL, as
    // the charts counted them before.
    await sql`insert into endpoint_attempt_hours
        (endpoint_id, hour, attempts, succeeded, latency_histogram,
         last_error_at, last_error_status, last_error_code, last_error_message)
      ${attemptHoursSql(sql`(
        select coalesce(d.endpoint_id, ep.id) as endpoint_id, a.started_at, a.latency_ms,
               a.status_code = 200 and a.error_code is null as ok,
               a.status_code, a.error_code, a.error_message
        from delivery_attempts a
        join deliveries d on d.id = a.delivery_id
        left join events e on d.endpoint_id is null and e.id = d.event_id
        left join webhook_endpoints ep on d.endpoint_id is null and ep.business_id = e.business_id
          and ep.mode = e.mode and ep.url = d.url
        where a.started_at >= now() - interval '8 days' and coalesce(d.endpoint_id, ep.id) is not null
      )`)}`.execute(db);
  },
};
