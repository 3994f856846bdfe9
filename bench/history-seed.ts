// The history of `bench:history`: a provider's first two weeks written straight into the sender's
// tables, as its first release's migrations made them, by set-based statements shaped like the rows
// the sender writes (the columns, JSON and messages of a session, its events, their deliveries and
// each attempt). One statement a day of history writes that day's payments, events, deliveries and
// attempts, so a day's rows go in together, as the sender wrote them. The sender's own later
// migrations then bring the seeded rows to its current schema, as a provider's upgrade would.
import { Kysely, Migrator, PostgresDialect } from 'kysely';
import pg from 'pg';
import { migrationProvider } from '../packages/sender/src/db/migrations.js';

// The last migration of the sender's first release: the schema the seed's rows are shaped for.
const FIRST_RELEASE = '0013_endpoint_failures';

/**
 * Migrates the database at `url` with the sender's own migrations of its first release (up to
 * `FIRST_RELEASE`, never edited once shipped): the schema the seed's rows are shaped for.
 * Its names, in order.
 */
export async function migrateToFirstRelease(url: string): Promise<string[]> {
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
  try {
    const migrator = new Migrator({ db, provider: migrationProvider });
    const { error, results } = await migrator.migrateTo(FIRST_RELEASE);
    if (error) throw error;
    return (results ?? []).map((r) => r.migrationName);
  } finally {
    await db.destroy();
  }
}

/** An endpoint of the big business: every one of its events is delivered to both. */
export interface SeededEndpoint {
  id: string;
  url: string;
}

/** What to seed: its size, and where the endpoints' URLs point. */
export interface HistoryPlan {
  /** Events in all, about: two thirds to the big business, the rest over the other businesses. */
  events: number;
  /** The other businesses, each with two endpoints and the same share of the rest. */
  businesses: number;
  days: number;
  bigBusiness: string;
  /** The receiver's origin (`http://127.0.0.1:<port>`): every endpoint's URL is on it. */
  origin: string;
}

/** The seconds after the first attempt at which each attempt of a failing delivery starts. */
const OFFSETS = [0, 5, 65, 365, 2165, 9365, 27365, 63365, 99365, 135365, 172800];

/** A payment as the API returns it (the sender's key order), for the payments' data and the events. */
const PAYMENT_JSON = `create function pg_temp.payment_json(id uuid, amount int, corr uuid, cust uuid,
    first_name text, last_name text, city text, business text, at timestamptz, ref text, n bigint,
    item text, status text, reason text, method text) returns text language sql immutable as $$
  select format('{"amount":%s,"cancellation_reason":%s,"correlation_id":"%s","currency":"NGN",'
    || '"customer":{"billing_address":{"city":"%s","country":"NG","line1":"%s Adeola Odeku Street",'
    || '"line2":"","state":"%s","zip_code":"1010%s"},"business_id":"%s","email":"%s.%s@example.com",'
    || '"first_name":"%s","id":"%s","last_name":"%s","phone_number":"+234803%s"},"date":"%s",'
    || '"description":"Order ORD-%s","id":"%s","metadata":{"order":{"identifier":"ORD-%s","items":'
    || '[{"name":"%s","type":"physical"}]}},"mode":"test","payment_method":%s,"reference":"%s","status":"%s"}',
    amount, coalesce('"' || reason || '"', 'null'), corr, city, n % 200 + 1, city, lpad((n % 100)::text, 2, '0'),
    business, lower(first_name), lower(last_name), first_name, cust, last_name, lpad((n % 10000000)::text, 7, '0'),
    to_char(at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), n, id, n, item,
    coalesce(method, 'null'), ref, status)
$$`;

/**
 * One day of history (`$2`, 0 the oldest) before `$1`: per payment of each business that day, its
 * row, a created event and a succeeded (90 %) or failed one, a delivery of each to both of the
 * business's endpoints, and their attempts. 94.2 % of deliveries succeed at the first attempt and
 * 5 % at the second (5 s later); the rest fail at every attempt of the schedule: failed after 11
 * attempts over 48 hours, or, for events of the last 48 hours, still pending with their next attempt due.
 */
const DAY = `with pay as materialized (
  select b.business_id, b.ep_a, b.url_a, b.ep_b, b.url_b, p, gen_random_uuid() as id,
    $1::timestamptz - make_interval(days => $3::int) + (p + random()) * ($4::float8 / b.np) * interval '1 second' as at,
    (20 + 160 * random()) * interval '1 second' as settle, random() < 0.9 as ok,
    (1 + floor(random() * 2000))::int * 500 as amount, gen_random_uuid() as corr, gen_random_uuid() as cust,
    (array['Ada','Chinedu','Funke','Ibrahim','Ngozi','Tunde','Zainab','Emeka'])[1 + floor(random() * 8)::int] as first_name,
    (array['Obi','Balogun','Okafor','Bello','Adeyemi','Eze','Musa','Nwosu'])[1 + floor(random() * 8)::int] as last_name,
    (array['Lagos','Abuja','Ibadan','Kano','Enugu','Port Harcourt'])[1 + floor(random() * 6)::int] as city,
    (array['E-book','Reading lamp','Headphones','Phone case','Backpack'])[1 + floor(random() * 5)::int] as item,
    'ref_' || substr(md5(random()::text), 1, 24) as ref
  from seed_businesses b
  cross join lateral generate_series(ceil($2::int * b.np / $3::int::numeric)::bigint, ceil(($2::int + 1) * b.np / $3::int::numeric)::bigint - 1) p
), ev as materialized (
  select pay.*, k, gen_random_uuid() as event_id, at + k * settle as event_at,
    case when k = 0 then 'payment.session.created' when ok then 'payment.session.succeeded'
      else 'payment.session.failed' end as type,
    pg_temp.payment_json(id, amount, corr, cust, first_name, last_name, city, business_id, at, ref, p, item,
      case when k = 0 then 'pending' when ok then 'settled' else 'failed' end,
      case when k = 1 and not ok then 'payment_failed' end,
      case when k = 1 then '{"type":"bank_account"}' end) as data
  from pay cross join (values (0), (1)) ks(k)
), pays as (
  insert into payments (id, business_id, mode, reference, status, method_type, data, expires_at, created_at, captured_at, links)
  select id, business_id, 'test', ref, case when ok then 'settled' else 'failed' end, 'bank_account', data::jsonb,
    at + interval '1 hour', at, case when ok then event_at - interval '10 seconds' end, '{}'
  from ev where k = 1
), evs as (
  insert into events (id, business_id, mode, type, payment_id, payload, created_at)
  select event_id, business_id, 'test', type, id,
    '{"event":"' || type || '","data":' || data || ',"checksum":"' || md5(data) || md5(type || data) || '"}', event_at
  from ev
), dl as (
  insert into deliveries (event_id, url, status, attempts, next_attempt_at, created_at, first_attempt_at,
    last_attempt_at, finished_at, last_status_code, last_error, endpoint_id)
  select event_id, url, status, attempts,
    case when status = 'pending' then first_at + offs[attempts + 1] * interval '1 second' else last_at end,
    event_at, first_at, last_at,
    case when status <> 'pending' then last_at + lat * interval '1 millisecond' end,
    case when status = 'delivered' then 200 when kind = 0 then 503 end,
    case when status = 'delivered' then null
      when kind = 0 then $5::text || ' answered 503; only 200 acknowledges a webhook.'
      when kind = 1 then 'No complete response from ' || $5::text || ' within 15000 ms.'
      else $5::text || ' refused the connection (nothing listens on that port).' end,
    ep
  from (
    select d.*, first_at + offs[attempts] * interval '1 second' as last_at
    from (
      select c.*, case when cls > 0 then cls when age >= 172800 then 11 else width_bucket(age, offs) end as attempts,
        case when cls > 0 then 'delivered' when age >= 172800 then 'failed' else 'pending' end as status
      from (
        select ev.event_id, ev.event_at, e.ep, e.url, offs, floor(random() * 3)::int as kind,
          ev.event_at + (20 + random() * 200) * interval '1 millisecond' as first_at,
          extract(epoch from $1::timestamptz - ev.event_at)::float8 - 0.2 as age, 20 + floor(random() * 400) as lat,
          case when r < 0.942 then 1 when r < 0.992 then 2 else 0 end as cls
        from ev cross join lateral (values (ev.ep_a, ev.url_a, random()), (ev.ep_b, ev.url_b, random())) e(ep, url, r),
          (select $6::float8[] as offs) o
      ) c
    ) d
  ) x
  returning id, url, status, attempts, first_attempt_at, last_status_code, last_error
)
insert into delivery_attempts (delivery_id, attempt, url, started_at, latency_ms, status_code, response_body,
  error_code, error_message)
select dl.id, a, dl.url, dl.first_attempt_at + ($6::float8[])[a] * interval '1 second',
  case when ok then 15 + floor(random() ^ 3 * 900) when kind = 0 then 20 + floor(random() * 300)
    when kind = 1 then 15000 + floor(random() * 40) else 1 + floor(random() * 5) end,
  case when ok then 200 when kind = 0 then 503 end,
  case when ok then '{"received":true}' when kind = 0 then '<html><body><h1>503 Service Unavailable</h1></body></html>' end,
  case when ok then null when kind = 0 then 'unexpected_status' when kind = 1 then 'timeout' else 'connection_refused' end,
  case when ok then null
    when kind = 0 then $5::text || ' answered 503; only 200 acknowledges a webhook.'
    when kind = 1 then 'No complete response from ' || $5::text || ' within 15000 ms.'
    else $5::text || ' refused the connection (nothing listens on that port).' end
from dl cross join lateral (
  select a, dl.status = 'delivered' and a = dl.attempts as ok,
    case when dl.last_status_code = 503 then 0 when dl.last_error like 'No complete%' then 1
      when dl.last_error is not null then 2 else floor(random() * 3)::int end as kind
  from generate_series(1, dl.attempts) a
) t`;

/** What was seeded, and how long it took. */
export interface Seeded {
  /** The big business's two endpoints, each signing with its own secret. */
  endpoints: [SeededEndpoint, SeededEndpoint];
  rows: { payments: number; events: number; deliveries: number; attempts: number; pending: number };
  bigBusinessEvents: number;
  /** The four tables with their indexes, and the whole database, in bytes. */
  bytes: { tables: number; database: number };
  seedSeconds: number;
  vacuumAnalyzeSeconds: number;
}

/**
 * Seeds `plan` into the database of `client` (see {@link migrateToFirstRelease}), then VACUUM
 * ANALYZE; `log` says how far it is.
 */
export async function seedHistory(
  client: pg.Client,
  plan: HistoryPlan,
  log: (line: string) => void,
): Promise<Seeded> {
  const t0 = performance.now();
  const bigPayments = Math.max(1, Math.round(plan.events / 3));
  const otherPayments = Math.max(1, Math.round((plan.events - 2 * bigPayments) / plan.businesses / 2));
  const host = new URL(plan.origin).host;
  const at = (await client.query<{ now: Date }>('select now()')).rows[0]?.now as Date;
  // The planner's guesses for these statements are far off (2e9 rows): JIT compiling cost 0.5 s a day.
  await client.query('set jit = off');
  await client.query(PAYMENT_JSON);
  await client.query(`create temp table seed_businesses (business_id text, np int, ep_a uuid, url_a text,
    ep_b uuid, url_b text)`);
  // The big business's endpoints, there for the whole history, each with its own v1 secret.
  const { rows: made } = await client.query<SeededEndpoint>(
    `with eps as (
       insert into webhook_endpoints (business_id, mode, url, description, created_at, updated_at)
       select $1, 'test', $2::text || '/hist/' || k, d, $3::timestamptz - interval '30 days',
         $3::timestamptz - interval '30 days'
       from (values ('a', 'orders'), ('b', 'ledger')) ks(k, d)
       returning id, url, created_at
     ), secrets as (
       insert into endpoint_signing_secrets (endpoint_id, secret, created_at)
       select id, 'whsec_' || encode(decode(md5(random()::text) || md5(random()::text), 'hex'), 'base64'), created_at
       from eps
     )
     select id, url from eps order by url`,
    [plan.bigBusiness, plan.origin, at],
  );
  const endpoints = made as [SeededEndpoint, SeededEndpoint];
  const [a, b] = endpoints;
  await client.query('insert into seed_businesses values ($1, $2, $3, $4, $5, $6)', [
    plan.bigBusiness,
    bigPayments,
    a.id,
    a.url,
    b.id,
    b.url,
  ]);
  // The other businesses: two endpoints each, signed with the business's secret (a row each).
  await client.query(
    `with biz as (select 'biz-hist-' || lpad(g::text, 4, '0') as business_id from generate_series(1, $1) g),
     eps as (
       insert into webhook_endpoints (business_id, mode, url, account_secrets, created_at, updated_at)
       select business_id, 'test', $2::text || '/' || business_id || '/' || k, true, $3::timestamptz - interval '30 days',
         $3::timestamptz - interval '30 days'
       from biz, (values ('a'), ('b')) ks(k)
       returning id, business_id, url
     ), secrets as (
       insert into signing_secrets (business_id, mode, secret, created_at)
       select business_id, 'test', 'whsec_' || encode(decode(md5(random()::text) || md5(random()::text), 'hex'), 'base64'),
         $3::timestamptz - interval '30 days'
       from biz
     )
     insert into seed_businesses
     select x.business_id, $4, x.id, x.url, y.id, y.url
     from eps x join eps y on y.business_id = x.business_id and y.url like '%/b' where x.url like '%/a'`,
    [plan.businesses, plan.origin, at, otherPayments],
  );
  // The last payment starts 5 minutes before now, so that its outcome (at most 3 later) is past.
  const span = plan.days * 86_400 - 300;
  for (let day = 0; day < plan.days; day++) {
    const t = performance.now();
    const { rowCount } = await client.query(DAY, [at, day, plan.days, span, host, OFFSETS]);
    log(
      `  day ${day + 1} of ${plan.days}: ${rowCount} attempts in ${((performance.now() - t) / 1000).toFixed(1)} s`,
    );
  }
  await client.query('drop table seed_businesses');
  const seedSeconds = (performance.now() - t0) / 1000;
  log(`seeded in ${seedSeconds.toFixed(0)} s; VACUUM ANALYZE...`);
  const t1 = performance.now();
  await client.query('vacuum analyze');
  const vacuumAnalyzeSeconds = (performance.now() - t1) / 1000;
  const { rows } = await client.query<Record<string, string>>(
    `select (select count(*) from payments) as payments, (select count(*) from events) as events,
       (select count(*) from deliveries) as deliveries, (select count(*) from delivery_attempts) as attempts,
       (select count(*) from deliveries where status = 'pending') as pending,
       (select count(*) from events where business_id = $1) as big,
       (select sum(pg_total_relation_size(t::regclass))
          from unnest(array['payments', 'events', 'deliveries', 'delivery_attempts']) t) as tables,
       pg_database_size(current_database()) as database`,
    [plan.bigBusiness],
  );
  const r = rows[0] as Record<string, string>;
  return {
    endpoints,
    rows: {
      payments: Number(r.payments),
      events: Number(r.events),
      deliveries: Number(r.deliveries),
      attempts: Number(r.attempts),
      pending: Number(r.pending),
    },
    bigBusinessEvents: Number(r.big),
    bytes: { tables: Number(r.tables), database: Number(r.database) },
    seedSeconds,
    vacuumAnalyzeSeconds,
  };
}

/**
 * `count` pending deliveries to `endpoint`, of the business's newest events, each with one failed
 * attempt and its retry an hour away: what an endpoint being removed has in flight.
 */
export async function seedPending(
  client: pg.Client,
  endpoint: { id: string; url: string },
  businessId: string,
  count: number,
): Promise<number> {
  const host = new URL(endpoint.url).host;
  const { rowCount } = await client.query(
    `with dl as (
       insert into deliveries (event_id, url, status, attempts, next_attempt_at, created_at, first_attempt_at,
         last_attempt_at, last_error, endpoint_id)
       select e.id, $2::text, 'pending', 1, now() + interval '1 hour', e.created_at, e.created_at, e.created_at,
         $5::text || ' refused the connection (nothing listens on that port).', $1::uuid
       from (select id, created_at from events where business_id = $3 and mode = 'test'
             order by created_at desc, id desc limit $4) e
       returning id, url, first_attempt_at
     )
     insert into delivery_attempts (delivery_id, attempt, url, started_at, latency_ms, error_code, error_message)
     select id, 1, url, first_attempt_at, 2, 'connection_refused',
       $5::text || ' refused the connection (nothing listens on that port).' from dl`,
    [endpoint.id, endpoint.url, businessId, count, host],
  );
  return rowCount ?? 0;
}
