import { type Kysely, sql } from 'kysely';

/** Migration 0015_endpoint_history, shipped: what it makes must never change; add the next. */
export async function up(db: Kysely<unknown>): Promise<void> {
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
      select id, greatest(created_at, updated_at), status, enabled_events from webhook_endpoints`.execute(db);
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
}
