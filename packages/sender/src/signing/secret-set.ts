// The rotation rule of signing secrets, written once for both kinds of owner: a business in one
// mode (signing_secrets) and an endpoint with secrets of its own (endpoint_signing_secrets). An
// owner has one current secret and up to MAX_VALID_SECRETS - 1 previous ones, each valid until
// its expires_at; a rotation makes a new current secret and leaves the old one valid for the
// overlap asked (docs/decisions.md, "Signatures beside the checksum", "A secret per endpoint").
// Secrets are sealed as they are written and opened as they are read (db/sealed-secrets.ts): this
// module is the only one that reads or writes them.
import { randomUUID } from 'node:crypto';
import { type RawBuilder, sql, type Transaction } from 'kysely';
import type { Db, Schema } from '../db/schema.js';
import { openSecret, sealSecret } from '../db/sealed-secrets.js';
import { isoMicros } from '../timestamps.js';

/**
 * The most secrets valid at once: the current one and up to four previous ones (rotations in quick
 * succession). Past it the oldest previous secret ends at once, so no owner can make every attempt
 * sign with an unbounded number of secrets.
 */
export const MAX_VALID_SECRETS = 5;

/** One owner's secrets: where they are kept, and how a new one is made. */
export interface SecretSet {
  table: 'signing_secrets' | 'endpoint_signing_secrets';
  /** The owner's columns and values: `{ business_id, mode }` or `{ endpoint_id }`. */
  owner: Record<string, string>;
  /** The advisory lock the owner's rotations queue on. */
  lock: string;
  /** The columns of a new secret: `{ secret }`, or `{ secret, public_key }` for a key pair. */
  fresh: () => Record<string, string | null>;
}

/** A valid secret, opened (`public_key` is null for an HMAC secret). */
export interface StoredSecret {
  secret: string;
  public_key: string | null;
  created_at: Date;
  expires_at: Date | null;
}

/** When a secret is valid, as its owner is shown it (the API's secret views share it). */
export interface SecretValidity {
  /** True for the one new receivers should be given. */
  current: boolean;
  created_at: string;
  /** When a previous one stops being signed with and accepted; null for the current one. */
  expires_at: string | null;
}

/** A stored secret's validity as its owner is shown it, in the API's timestamps. */
export function validityOf(row: StoredSecret): SecretValidity {
  return {
    current: row.expires_at === null,
    created_at: isoMicros(row.created_at),
    expires_at: row.expires_at === null ? null : isoMicros(row.expires_at),
  };
}

const ofOwner = (set: SecretSet): RawBuilder<unknown> =>
  sql.join(
    Object.entries(set.owner).map(([column, value]) => sql`${sql.ref(column)} = ${value}`),
    sql` and `,
  );

/** Makes the owner's first secret if it has none: one statement, safe against a concurrent call. */
export async function ensureSecret(db: Db, set: SecretSet): Promise<void> {
  const id = randomUUID();
  const fresh = set.fresh();
  const secret = sealSecret(db, set.table, id, set.owner, fresh.secret as string);
  const row = { id, ...set.owner, ...fresh, secret };
  const columns = (names: string[]) => sql.join(names.map((name) => sql.ref(name)));
  // The unique index on the owner's current secret keeps one.
  await sql`insert into ${sql.table(set.table)} (${columns(Object.keys(row))})
    values (${sql.join(Object.values(row))})
    on conflict (${columns(Object.keys(set.owner))}) where expires_at is null do nothing`.execute(db);
}

/** The owner's secrets valid at `now`, the current one first, then the previous ones newest first. */
export async function validSecrets(db: Db, set: SecretSet, now: Date = new Date()): Promise<StoredSecret[]> {
  const publicKey = set.table === 'endpoint_signing_secrets' ? sql`public_key` : sql`null::text`;
  const { rows } = await sql<StoredSecret & { id: string }>`select id, secret, ${publicKey} as public_key,
      created_at, expires_at
    from ${sql.table(set.table)}
    where ${ofOwner(set)} and (expires_at is null or expires_at > ${now})
    order by expires_at is null desc, created_at desc
    limit ${MAX_VALID_SECRETS}`.execute(db);
  return rows.map(({ id, ...row }) => ({
    ...row,
    secret: openSecret(db, set.table, { id, secret: row.secret, ...set.owner }),
  }));
}

/** {@link validSecrets}, with a current secret made first if the owner has none. */
export async function currentSecrets(db: Db, set: SecretSet): Promise<StoredSecret[]> {
  const rows = await validSecrets(db, set);
  if (rows.some((row) => row.expires_at === null)) return rows;
  await ensureSecret(db, set);
  return validSecrets(db, set);
}

/**
 * Rotates in the caller's transaction: the current secret stays valid for `overlapSeconds` more
 * (0 ends it now, for a secret that leaked), a new one becomes current, and previous secrets past
 * {@link MAX_VALID_SECRETS} end now. Rotations of one owner queue on an advisory lock held to the
 * commit, so each sees the secret the one before it made, and makes exactly one new one.
 */
export async function rotateSecrets(
  tx: Transaction<Schema>,
  set: SecretSet,
  overlapSeconds: number,
): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtext(${set.lock}))`.execute(tx);
  await ensureSecret(tx, set);
  const now = (await sql<{ now: Date }>`select clock_timestamp() as now`.execute(tx)).rows[0]?.now as Date;
  const until = new Date(new Date(now).getTime() + overlapSeconds * 1000);
  const table = sql.table(set.table);
  await sql`update ${table} set expires_at = ${until} where ${ofOwner(set)} and expires_at is null`.execute(
    tx,
  );
  await ensureSecret(tx, set);
  // The newest previous secrets stay (the current one and MAX_VALID_SECRETS - 1 others).
  await sql`update ${table} set expires_at = ${now}
    where ${ofOwner(set)} and expires_at > ${now} and id not in (
      select id from ${table} where ${ofOwner(set)} and expires_at > ${now}
      order by created_at desc limit ${MAX_VALID_SECRETS - 1})`.execute(tx);
}
