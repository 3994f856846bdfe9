import type { MigrationProvider } from 'kysely';
import { historyMigrations } from './migrations/history.js';
import { initialMigrations } from './migrations/initial.js';

// Versioned migrations, applied in order at start and recorded by Kysely's migrator (which also
// locks, so several sender instances starting on one PostgreSQL apply each migration once).
// Never edit a migration that has shipped: add the next, in a file of `migrations/`.

/** The migrations, for Kysely's `Migrator`. */
export const migrationProvider: MigrationProvider = {
  getMigrations: async () => ({ ...initialMigrations, ...historyMigrations }),
};
