import { type PGlite, parse, protocol, type Results } from '@electric-sql/pglite';
import type { DatabaseConnection, Driver, QueryResult } from 'kysely';
import {
  type CompiledQuery,
  type Dialect,
  type Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
} from 'kysely';
import { marksWake, type WakeSignal, type WakeTracker } from './wake.js';

/** The marker of statements run as named prepared statements (`PREPARE` in ./postgres.ts). */
const PREPARED_MARK = '/* payhook:prepare */ ';
/** Past this many texts, marked statements run unnamed: a bound on what the session keeps. */
const MAX_PREPARED = 32;

/** Protocol messages sent as one buffer: one call into PGlite rather than one each. */
function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

/**
 * A Kysely dialect over PGlite. PGlite is one connection: the driver hands it to one user at a
 * time (a transaction holds it until it commits), so concurrent requests queue instead of
 * interleaving their statements in one session. Statements marked with `PREPARE` run as named
 * prepared statements (parsed and planned once per text, where `PGlite.query` plans every run:
 * most of a large statement's time), and each statement or transaction control is one call into
 * PGlite's protocol, not the five or six `query` makes (docs/decisions.md, "PGlite keeps up").
 */
export function pgliteDialect(db: PGlite, wake?: WakeSignal): PGliteDialect {
  let driver: PGliteDriver | undefined;
  return {
    beginWith: (settings) => driver?.beginWith(settings) ?? false,
    createAdapter: () => new PostgresAdapter(),
    createDriver: () => {
      driver = new PGliteDriver(db, wake?.tracker());
      return driver;
    },
    createIntrospector: (kysely: Kysely<unknown>) => new PostgresIntrospector(kysely),
    createQueryCompiler: () => new PostgresQueryCompiler(),
  };
}

/** The PGlite dialect, and a way to send settings with a transaction's `begin`. */
export interface PGliteDialect extends Dialect {
  /**
   * Sends `settings` (`set local ...` statements) with the `begin` of the transaction that holds
   * the connection now, if that `begin` is still pending (no statement has run in it): no call of
   * their own. False when it cannot, and the caller runs them itself.
   */
  beginWith(settings: string): boolean;
}

class PGliteDriver implements Driver {
  private tail: Promise<void> = Promise.resolve();
  private readonly connection: DatabaseConnection;
  /**
   * A `begin` not sent yet: it goes with the transaction's first statement, in the same call
   * (a transaction of one statement and its commit is two calls into PGlite, not three).
   */
  private beginPending = false;
  /** The text of the pending `begin`, with the settings given to `beginWith`. */
  private beginText = 'begin';
  /** The named statements of this session: their names and parameter types, by text. */
  private readonly prepared = new Map<string, { name: string; types: number[] }>();

  constructor(
    private readonly db: PGlite,
    /** Wakes the delivery workers after a commit of deliveries (`./wake.ts`). */
    private readonly wake?: WakeTracker,
  ) {
    this.connection = {
      executeQuery: async <R>(query: CompiledQuery): Promise<QueryResult<R>> => {
        const parameters = query.parameters as unknown[];
        const result =
          query.sql.startsWith(PREPARED_MARK) &&
          (this.prepared.has(query.sql) || this.prepared.size < MAX_PREPARED)
            ? await this.runPrepared<R>(query.sql, parameters)
            : await this.runUnnamed<R>(query.sql, parameters);
        this.wake?.after(query.sql, marksWake(result.rows));
        const affected = result.affectedRows ?? 0;
        return {
          rows: result.rows,
          ...(affected > 0 || result.rows.length === 0 ? { numAffectedRows: BigInt(affected) } : {}),
        };
      },
      streamQuery: () => {
        throw new Error('Streaming is not supported on PGlite.');
      },
    };
  }

  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    let release: () => void = () => {};
    const previous = this.tail;
    this.tail = new Promise<void>((resolve) => {
      release = resolve;
    });
    await previous;
    this.releases.push(release);
    return this.connection;
  }

  private readonly releases: (() => void)[] = [];

  /** A statement with `PGlite.query`, after the `begin` still pending. */
  private async runUnnamed<R>(text: string, parameters: unknown[]): Promise<Results<R>> {
    if (this.beginPending) await this.control('begin');
    return this.db.query<R>(text, parameters);
  }

  /** See {@link PGliteDialect.beginWith}. */
  beginWith(settings: string): boolean {
    if (!this.beginPending) return false;
    this.beginText = `begin; ${settings}`;
    return true;
  }

  /** The pending `begin`'s text, taken: the transaction is begun by whoever sends it. */
  private takeBegin(): string {
    const text = this.beginText;
    this.beginPending = false;
    this.beginText = 'begin';
    return text;
  }

  /** A statement of the session as one simple query: one call into PGlite. */
  private async control(text: 'begin' | 'commit' | 'rollback'): Promise<void> {
    const sent = text === 'begin' ? this.takeBegin() : text;
    await this.db.runExclusive(() =>
      this.db.execProtocol(protocol.serialize.query(sent), { syncToFs: false }),
    );
  }

  /** Runs `text` as a named prepared statement: prepared on its first run, then bound and run. */
  private runPrepared<R>(text: string, parameters: readonly unknown[]): Promise<Results<R>> {
    const { serialize } = protocol;
    return this.db.runExclusive(async () => {
      let statement = this.prepared.get(text);
      if (statement === undefined) {
        const name = `payhook_${this.prepared.size + 1}`;
        const { messages } = await this.db.execProtocol(
          concat(
            serialize.parse({ name, text, types: [] }),
            serialize.describe({ type: 'S', name }),
            serialize.sync(),
          ),
          { syncToFs: false },
        );
        const description = messages.find((m) => m.name === 'parameterDescription') as
          | { dataTypeIDs: number[] }
          | undefined;
        statement = { name, types: description?.dataTypeIDs ?? [] };
        this.prepared.set(text, statement);
      }
      const { types } = statement;
      const values = parameters.map((value, i) => {
        if (value === null || value === undefined) return null;
        const serializer = this.db.serializers[types[i] as number];
        return serializer ? serializer(value) : String(value);
      });
      const begin = this.beginPending ? serialize.query(this.takeBegin()) : new Uint8Array();
      const { messages } = await this.db.execProtocol(
        concat(
          begin,
          serialize.bind({ statement: statement.name, values }),
          serialize.describe({ type: 'P' }),
          serialize.execute({}),
          serialize.sync(),
        ),
        { syncToFs: false },
      );
      // The begin's own answers (its command, ready for query) come first: the statement's last.
      return parse.parseResults(messages, this.db.parsers).at(-1) as Results<R>;
    });
  }

  async beginTransaction(): Promise<void> {
    this.beginPending = true;
    this.wake?.before('begin');
  }

  async commitTransaction(): Promise<void> {
    // A transaction that ran nothing has nothing to commit.
    if (this.beginPending) this.takeBegin();
    else await this.control('commit');
    this.wake?.after('commit', false);
  }

  async rollbackTransaction(): Promise<void> {
    this.wake?.reset();
    if (this.beginPending) this.takeBegin();
    else await this.control('rollback');
  }

  async releaseConnection(): Promise<void> {
    this.releases.shift()?.();
  }

  async destroy(): Promise<void> {
    await this.db.close();
  }
}
