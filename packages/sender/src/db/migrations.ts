import type { Migration, MigrationProvider } from 'kysely';
import * as m0001 from './migrations/0001-keys-and-settings.js';
import * as m0002 from './migrations/0002-customers.js';
import * as m0003 from './migrations/0003-beneficiaries.js';
import * as m0004 from './migrations/0004-payments-and-outbox.js';
import * as m0005 from './migrations/0005-capture.js';
import * as m0006 from './migrations/0006-idempotency-keys.js';
import * as m0007 from './migrations/0007-delivery.js';
import * as m0008 from './migrations/0008-attempt-key.js';
import * as m0009 from './migrations/0009-signing-secrets.js';
import * as m0010 from './migrations/0010-delivery-instances.js';
import * as m0011 from './migrations/0011-dashboard-sessions.js';
import * as m0012 from './migrations/0012-webhook-endpoints.js';
import * as m0013 from './migrations/0013-endpoint-failures.js';
import * as m0014 from './migrations/0014-endpoint-attempt-hours.js';
import * as m0015 from './migrations/0015-endpoint-history.js';
import * as m0016 from './migrations/0016-event-delivery-marks.js';

// Versioned migrations, applied in order at start and recorded by Kysely's migrator (which also
// locks, so several sender instances starting on one PostgreSQL apply each migration once). One
// module each in `migrations/`, exporting its `up` as Kysely's migration files do, named by its
// number and purpose; the name recorded in `kysely_migration` is the key below, and a database
// upgrades only while those stay as they shipped. A migration that has shipped must make the same
// schema forever: add the next file and its line here. Their source may be rewritten only into the
// same statements, as when the columns every table repeats moved into `migrations/columns.ts`
// (whose helpers, used by shipped migrations, never change what they make);
// test/migrated-schema.test.ts compares the schema they make with the one checked in. Indexes on
// the tables delivery writes are not built by a migration but beside them, without a write lock
// (`online-indexes.ts`).
const migrations: Record<string, Migration> = {
  '0001_keys_and_settings': m0001,
  '0002_customers': m0002,
  '0003_beneficiaries': m0003,
  '0004_payments_and_outbox': m0004,
  '0005_capture': m0005,
  '0006_idempotency_keys': m0006,
  '0007_delivery': m0007,
  '0008_attempt_key': m0008,
  '0009_signing_secrets': m0009,
  '0010_delivery_instances': m0010,
  '0011_dashboard_sessions': m0011,
  '0012_webhook_endpoints': m0012,
  '0013_endpoint_failures': m0013,
  '0014_endpoint_attempt_hours': m0014,
  '0015_endpoint_history': m0015,
  '0016_event_delivery_marks': m0016,
};

/** The migrations, for Kysely's `Migrator`. */
export const migrationProvider: MigrationProvider = {
  getMigrations: async () => migrations,
};
