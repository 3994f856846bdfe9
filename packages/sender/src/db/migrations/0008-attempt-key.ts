import { type Kysely, sql } from 'kysely';

/** Migration 0008_attempt_key, shipped: what it makes must never change; add the next. */
export async function up(db: Kysely<unknown>): Promise<void> {
  // An attempt is known by its delivery and number: that unique pair becomes the primary key,
  // and the random uuid key, which every recorded attempt paid for with an index entry, goes.
  await sql`alter table delivery_attempts drop constraint delivery_attempts_pkey`.execute(db);
  await sql`alter table delivery_attempts drop column id`.execute(db);
  await sql`alter table delivery_attempts drop constraint delivery_attempts_number`.execute(db);
  await sql`alter table delivery_attempts add constraint delivery_attempts_pkey primary key (delivery_id, attempt)`.execute(
    db,
  );
  // Attempts are written only by the worker's record statement, joined to the delivery row it
  // updates in the same statement, and deliveries are never deleted: the foreign key's check,
  // a query and a row lock per recorded attempt, guarded nothing that statement does not.
  await sql`alter table delivery_attempts drop constraint delivery_attempts_delivery_id_fkey`.execute(db);
}
