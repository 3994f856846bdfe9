import { type Kysely, type Migration, sql } from 'kysely';
import { attemptHoursSql, HISTOGRAM_BUCKETS } from '../attempt-hours.js';

// The migrations that keep a provider's history cheap to read (0014 on). Never edit one that has
// shipped: add the next. Indexes on the tables delivery writes are not built here but beside the
// migrations, without a write lock (`../online-indexes.ts`).
export const historyMigrations: Record<string, Migration> = {
  '0014_endpoint_attempt_hours': {
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
  },
  '0015_endpoint_history': {
    async up(db: Kysely<unknown>) {
      // Each endpoint's status and filter over time, a row from each change on: what a recovery
      // reads to know when events could have been made without a delivery to it (disabled, or
      // of a type its filter then left out), so that it reads the events of those times only
      // (docs/decisions.md, "Recover reads what could have been missed"). Kept by a trigger, so
      // that no writer of the endpoints' table can forget it. An endpoint made before this
      // migration has had its status and filter since it was last updated (every change of them
      // sets updated_at): its first row is then, and a recovery reads every event before it.
      await db.schema
        .createTable('endpoint_history')
        .addColumn('endpoint_id', 'uuid', (c) =>
          c.notNull().references('webhook_endpoints.id').onDelete('cascade'),
        )
        .addColumn('at', 'timestamptz', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('enabled_events', 'jsonb', (c) => c.notNull())
        .addPrimaryKeyConstraint('endpoint_history_pkey', ['endpoint_id', 'at'])
        .execute();
      await sql`insert into endpoint_history (endpoint_id, at, status, enabled_events)
        select id, greatest(created_at, updated_at), status, enabled_events from webhook_endpoints`.execute(
        db,
      );
      await sql`create function payhook_endpoint_history() returns trigger language plpgsql as $$
        begin
          if tg_op = 'INSERT' or new.status is distinct from old.status
             or new.enabled_events is distinct from old.enabled_events then
            insert into endpoint_history (endpoint_id, at, status, enabled_events)
            values (new.id, case when tg_op = 'INSERT' then new.created_at else clock_timestamp() end,
                    new.status, new.enabled_events)
            on conflict (endpoint_id, at) do update
            set status = excluded.status, enabled_events = excluded.enabled_events;
          end if;
          return null;
        end $$`.execute(db);
      await sql`create trigger endpoint_history after insert or update of status, enabled_events
        on webhook_endpoints for each row execute function payhook_endpoint_history()`.execute(db);
    },
  },
};
