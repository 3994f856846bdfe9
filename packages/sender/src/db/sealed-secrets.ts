// The one place that seals and opens the signing secrets the database keeps (the `secret` column
// of signing_secrets and endpoint_signing_secrets): every reader and writer of them goes through
// sealSecret and openSecret, with the box of the database they run on. Each value is bound to its
// row (table, id and owner), so a sealed value copied into another row does not open. At start,
// after the migrations, sealStoredSecrets checks the keys against the values and seals what a
// previous version stored as it was (docs/decisions.md, "Signing secrets sealed at rest").
import {
  type KyselyPlugin,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  sql,
} from 'kysely';
import type { Db } from './schema.js';
import { type SecretBox, SecretKeyError, sealedKeyId } from './secret-box.js';

/** The tables that keep signing secrets, and the columns that own a row (bound to its value). */
export const SEALED_TABLES = {
  signing_secrets: ['business_id', 'mode'],
  endpoint_signing_secrets: ['endpoint_id'],
} as const;

/** A table that keeps signing secrets. */
export type SealedTable = keyof typeof SEALED_TABLES;

/**
 * Carries a database's box on its Kysely instances: plugins go with every transaction made from
 * them, so a statement on `db`, on a transaction or on the worker's pool finds the same box. It
 * changes no query and no result.
 */
export class SecretBoxPlugin implements KyselyPlugin {
  constructor(public box: SecretBox | undefined = undefined) {}
  transformQuery(args: PluginTransformQueryArgs) {
    return args.node;
  }
  transformResult(args: PluginTransformResultArgs) {
    return Promise.resolve(args.result);
  }
}

function boxOf(db: Db): SecretBox {
  const plugin = db.getExecutor().plugins.find((p) => p instanceof SecretBoxPlugin);
  if (!plugin?.box) {
    throw new SecretKeyError(
      'secret_key_missing',
      'This database was opened without a key to seal signing secrets.',
    );
  }
  return plugin.box;
}

/** What a value is bound to: its table, its row's id and its owner's columns, in order. */
function context(table: SealedTable, id: string, owner: Record<string, unknown>): string {
  return JSON.stringify([table, id, ...SEALED_TABLES[table].map((column) => String(owner[column]))]);
}

/**
 * A secret sealed for the row `id` of `table` owned by `owner` (its owner columns), as it is
 * stored: `v1:<key id>:...`.
 */
export function sealSecret(
  db: Db,
  table: SealedTable,
  id: string,
  owner: Record<string, unknown>,
  value: string,
) {
  return boxOf(db).seal(value, context(table, id, owner));
}

/**
 * The secret a row keeps. A value without the `v1:` prefix was stored as it is by a version
 * before sealing (one still running during an upgrade), and is sealed at the next start.
 */
export function openSecret(
  db: Db,
  table: SealedTable,
  row: { id: string; secret: string } & Record<string, unknown>,
): string {
  if (sealedKeyId(row.secret) === undefined) return row.secret;
  return boxOf(db).open(row.secret, context(table, row.id, row));
}

/** What {@link sealStoredSecrets} did. */
export interface SealReport {
  /** Values stored as they were, now sealed. */
  sealed: number;
  /** Values sealed under a previous key, now sealed under the current one. */
  resealed: number;
}

type Row = { id: string; secret: string } & Record<string, unknown>;

/** Replaces each row's value, if it is still the one read (another instance may have done it). */
async function replace(db: Db, table: SealedTable, rows: { id: string; old: string; value: string }[]) {
  if (rows.length === 0) return;
  const values = sql.join(rows.map((r) => sql`(${r.id}::uuid, ${r.old}, ${r.value})`));
  await sql`update ${sql.table(table)} t set secret = v.value from (values ${values}) v(id, old, value)
    where t.id = v.id and t.secret = v.old`.execute(db);
}

/**
 * Checks the box's keys against the stored values, then seals what is stored as it is and seals
 * again under the current key what a previous key sealed, in batches of `batchSize` rows: safe to
 * run on every start, by several instances at once. One value per key id is opened first, so a
 * wrong key, or values sealed under a key not held, is a {@link SecretKeyError} before anything
 * is written, never a failure to sign later.
 */
export async function sealStoredSecrets(db: Db, box: SecretBox, batchSize = 500): Promise<SealReport> {
  const report: SealReport = { sealed: 0, resealed: 0 };
  const tables = Object.keys(SEALED_TABLES) as SealedTable[];
  const columns = (table: SealedTable) =>
    sql.join(['id', 'secret', ...SEALED_TABLES[table]].map((c) => sql.ref(c)));
  for (const table of tables) {
    const { rows } = await sql<Row>`select distinct on (split_part(secret, ':', 2)) ${columns(table)}
      from ${sql.table(table)} where secret like 'v1:%' order by split_part(secret, ':', 2)`.execute(db);
    for (const row of rows) box.open(row.secret, context(table, row.id, row));
  }
  for (const table of tables) {
    for (;;) {
      const { rows } = await sql<Row>`select ${columns(table)} from ${sql.table(table)}
        where secret not like 'v1:%' or split_part(secret, ':', 2) <> ${box.currentId}
        order by id limit ${batchSize}`.execute(db);
      await replace(
        db,
        table,
        rows.map((row) => {
          const plain = sealedKeyId(row.secret) === undefined;
          const value = plain ? row.secret : box.open(row.secret, context(table, row.id, row));
          if (plain) report.sealed++;
          else report.resealed++;
          return { id: row.id, old: row.secret, value: box.seal(value, context(table, row.id, row)) };
        }),
      );
      if (rows.length < batchSize) break;
    }
  }
  return report;
}
