import { sql } from 'kysely';
import type { WorkerLogger } from '../logger.js';
import type { Database } from './database.js';

/** The server settings autovacuum needs, as {@link checkAutovacuum} found them. */
export interface AutovacuumSettings {
  autovacuum: string;
  track_counts: string;
  /** The sender's tables whose own storage parameters turn autovacuum off. */
  tablesWithoutAutovacuum: string[];
}

/**
 * On PostgreSQL, reads whether the server's autovacuum runs (`autovacuum`, and `track_counts`,
 * without which it has nothing to go by) and whether any of the sender's tables turns it off for
 * itself (`autovacuum_enabled = false`), and logs one warning naming what is off. Without it,
 * nothing removes the row versions that deliveries and retention leave dead, and nothing gathers
 * the planner's statistics: on a server with autovacuum off, a query on a table never analyzed
 * took 4.4 s on an almost empty database. Resolves with what it read (undefined on PGlite, whose
 * upkeep is `db/maintenance.ts`, or when the settings cannot be read: the start goes on).
 *
 * @example
 * ```ts
 * await checkAutovacuum(database, app.log);
 * ```
 */
export async function checkAutovacuum(
  database: Database,
  log: WorkerLogger,
): Promise<AutovacuumSettings | undefined> {
  if (database.kind !== 'postgres') return undefined;
  try {
    const { rows } = await sql<{ autovacuum: string; track_counts: string; tables: string[] }>`
      select current_setting('autovacuum') as autovacuum, current_setting('track_counts') as track_counts,
        array(
          select c.relname::text from pg_catalog.pg_class c
          join pg_catalog.pg_namespace n on n.oid = c.relnamespace
          where n.nspname = current_schema() and c.relkind = 'r'
            and exists (select 1 from unnest(c.reloptions) o where o ~* '^autovacuum_enabled=(f|n|of|0)')
          order by c.relname
        ) as tables`.execute(database.db);
    const row = rows[0];
    if (!row) return undefined;
    const settings: AutovacuumSettings = {
      autovacuum: row.autovacuum,
      track_counts: row.track_counts,
      tablesWithoutAutovacuum: row.tables,
    };
    const off = [
      ...(settings.autovacuum === 'on' ? [] : ['autovacuum = off']),
      ...(settings.track_counts === 'on' ? [] : ['track_counts = off']),
      ...settings.tablesWithoutAutovacuum.map((t) => `autovacuum_enabled = false on ${t}`),
    ];
    if (off.length > 0) {
      log.warn(
        { ...settings },
        `PostgreSQL's autovacuum does not run here (${off.join(', ')}): nothing removes the rows that deliveries and retention leave dead or keeps the planner's statistics, and queries slow down as tables grow; turn autovacuum and track_counts on (the sender's README, "PostgreSQL settings")`,
      );
    }
    return settings;
  } catch {
    return undefined;
  }
}
