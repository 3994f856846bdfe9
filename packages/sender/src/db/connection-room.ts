import { sql } from 'kysely';
import { type Database, DELIVERY_POOL_SIZE } from './database.js';

/** The connections a PostgreSQL server allows, and how many are taken. */
export interface ConnectionRoom {
  /** The server's `max_connections`. */
  max: number;
  /** Kept for superusers and roles with `pg_use_reserved_connections` (PostgreSQL 16 and later). */
  reserved: number;
  /** Client connections open now, this process's included. */
  inUse: number;
}

/**
 * Connections one sender process opens at most on PostgreSQL: `poolSize` for the API's
 * statements, the delivery worker's 4, one that listens for wake-ups, and one for migrations and
 * health probes.
 */
export const connectionsPerProcess = (poolSize: number): number => poolSize + DELIVERY_POOL_SIZE + 2;

/**
 * How many connections the server behind `database` allows and has open (`undefined` on PGlite,
 * or when the server will not say). Read once, at a start: the count moves with every client.
 *
 * @example
 * ```ts
 * const room = await connectionRoom(database);
 * if (room) console.log(room.max - room.reserved - room.inUse, 'connections free');
 * ```
 */
export async function connectionRoom(database: Database): Promise<ConnectionRoom | undefined> {
  if (database.kind !== 'postgres') return undefined;
  try {
    const { rows } = await sql<ConnectionRoom>`select
        current_setting('max_connections')::int as max,
        current_setting('superuser_reserved_connections')::int
          + coalesce(current_setting('reserved_connections', true)::int, 0) as reserved,
        (select count(*) from pg_stat_activity where backend_type = 'client backend')::int as "inUse"`.execute(
      database.db,
    );
    return rows[0];
  } catch {
    return undefined;
  }
}
