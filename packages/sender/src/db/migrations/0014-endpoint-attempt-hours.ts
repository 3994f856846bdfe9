import { type Kysely, sql } from 'kysely';

/**
 * Migration 0014_endpoint_attempt_hours, shipped: what it makes must never change; add the next.
 * What it read from `attempt-hours.ts` when it shipped is written out here (the histogram's 28
 * buckets: 27 bounds in ms and one past them; an attempt's bucket and UTC hour; the rows of an
 * endpoint's hour), so that it makes the same table and the same rows whatever that module
 * becomes. Bounds changed there need a new migration that rewrites the rows and this check.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
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
      c.notNull().check(sql`cardinality(latency_histogram) = 28`),
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
      select endpoint_id, hour, attempts, succeeded,
             (select array_agg((select count(*) from unnest(positions) p where p = i)::int order by i)
              from generate_series(1, 28) i) as latency_histogram,
             last_error_at, last_error_status, last_error_code, last_error_message
      from (
        select endpoint_id, to_timestamp(floor(extract(epoch from started_at) / 3600) * 3600) as hour,
               count(*)::int as attempts,
               count(*) filter (where ok)::int as succeeded,
               array_agg(width_bucket(latency_ms, array[1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, 150, 200,
                 300, 500, 700, 1000, 1500, 2000, 3000, 5000, 7000, 10000, 15000, 20000, 30000]::int[]) + 1)
                 as positions,
               max(started_at) filter (where not ok) as last_error_at,
               (array_agg(status_code order by started_at desc) filter (where not ok))[1] as last_error_status,
               (array_agg(error_code order by started_at desc) filter (where not ok))[1] as last_error_code,
               (array_agg(left(error_message, 1000) order by started_at desc) filter (where not ok))[1]
                 as last_error_message
        from (
          select coalesce(d.endpoint_id, ep.id) as endpoint_id, a.started_at, a.latency_ms,
                 a.status_code = 200 and a.error_code is null as ok,
                 a.status_code, a.error_code, a.error_message
          from delivery_attempts a
          join deliveries d on d.id = a.delivery_id
          left join events e on d.endpoint_id is null and e.id = d.event_id
          left join webhook_endpoints ep on d.endpoint_id is null and ep.business_id = e.business_id
            and ep.mode = e.mode and ep.url = d.url
          where a.started_at >= now() - interval '8 days' and coalesce(d.endpoint_id, ep.id) is not null
        ) s
        group by endpoint_id, 2
      ) g`.execute(db);
}
