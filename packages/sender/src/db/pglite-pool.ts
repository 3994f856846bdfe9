import { parse, protocol, type Results } from '@electric-sql/pglite';
import type { DatabaseConnection, Driver, QueryResult } from 'kysely';
import {
  type CompiledQuery,
  type Dialect,
  type Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
} from 'kysely';
import { type BackendMessage, concat, type PGliteThread } from './pglite-thread.js';
import { marksWake, type WakeSignal } from './wake.js';

/** The marker of statements run as named prepared statements (`PREPARE` in ./postgres.ts). */
const PREPARED_MARK = '/* payhook:prepare */ ';
/** Past this many texts, marked statements run unnamed: a bound on what the session keeps. */
const MAX_PREPARED = 32;

/**
 * A Kysely dialect over PGlite on its thread (`./pglite-thread.ts`). PGlite is one session, which
 * runs what it is sent in the order it was sent. The driver hands it to one user at a time, as a
 * pool of one connection, but a user gives it up as soon as it has *sent* its last message, not
 * when the answer comes back: a transaction once its commit or rollback is sent, a statement
 * outside a transaction once it is sent. The next user's messages queue behind on the thread, so
 * the database never waits for this thread to take an answer and send the next turn's
 * (docs/decisions.md, "PGlite runs on a thread of its own"). Statements marked with `PREPARE` run
 * as named prepared statements (parsed and planned once per text), and each statement goes with
 * its transaction's pending `begin` in one message (docs/decisions.md, "PGlite keeps up").
 */
export function pgliteDialect(db: PGliteThread, wake?: WakeSignal): PGliteDialect {
  let driver: PGliteDriver | undefined;
  return {
    beginWith: (settings) => driver?.beginWith(settings) ?? false,
    createAdapter: () => new PostgresAdapter(),
    createDriver: () => {
      driver = new PGliteDriver(db, wake);
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
   * the connection now, if that `begin` is still pending (no statement has run in it): no message
   * of their own. False when it cannot, and the caller runs them itself.
   */
  beginWith(settings: string): boolean;
}

/** One user's turn with the session, from `acquireConnection` to its last message sent. */
class Turn implements DatabaseConnection {
  /** Between `beginTransaction` and the commit or rollback being sent. */
  inTransaction = false;
  /**
   * A `begin` not sent yet: it goes with the transaction's first statement, in the same message
   * (a transaction of one statement and its commit is two messages to PGlite's thread, not three).
   */
  beginPending = false;
  /** The text of the pending `begin`, with the settings given to `beginWith`. */
  beginText = 'begin';
  /** A statement of the transaction wrote due deliveries: wake the workers once it commits. */
  marked = false;
  /** Whether this turn still holds the session (until its last message is sent). */
  private held = true;

  constructor(
    private readonly driver: PGliteDriver,
    private releaseTurn: () => void,
  ) {}

  /** Gives the session to the next user (once). */
  release(): void {
    if (!this.held) return;
    this.held = false;
    this.releaseTurn();
  }

  /** Takes the session again, for a statement after a first outside a transaction (`db.connection()`). */
  private async hold(): Promise<void> {
    if (this.held) return;
    this.releaseTurn = await this.driver.nextTurn();
    this.held = true;
  }

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    await this.hold();
    const inTransaction = this.inTransaction;
    // Outside a transaction, the turn ends with the statement's last message.
    const sent = inTransaction ? () => {} : () => this.release();
    let result: Results<R>;
    try {
      result = await this.driver.run<R>(this, query.sql, query.parameters as unknown[], sent);
    } finally {
      sent();
    }
    if (marksWake(result.rows)) {
      if (inTransaction) this.marked = true;
      else this.driver.wake?.fire();
    }
    const affected = result.affectedRows ?? 0;
    return {
      rows: result.rows,
      ...(affected > 0 || result.rows.length === 0 ? { numAffectedRows: BigInt(affected) } : {}),
    };
  }

  streamQuery(): never {
    throw new Error('Streaming is not supported on PGlite.');
  }

  /** The pending `begin`'s text, taken: the transaction is begun by whoever sends it. */
  takeBegin(): string {
    const text = this.beginText;
    this.beginPending = false;
    this.beginText = 'begin';
    return text;
  }

  /** Ends the transaction: sends `commit` or `rollback`, gives up the turn, then waits for the answer. */
  async end(text: 'commit' | 'rollback'): Promise<void> {
    const wake = text === 'commit' && this.marked;
    this.inTransaction = false;
    this.marked = false;
    // A transaction that ran nothing has nothing to end.
    if (this.beginPending) {
      this.takeBegin();
      this.release();
      return;
    }
    const answer = this.driver.send(protocol.serialize.query(text));
    this.release();
    await answer;
    if (wake) this.driver.wake?.fire();
  }
}

class PGliteDriver implements Driver {
  private tail: Promise<void> = Promise.resolve();
  /** The turn that holds the session now (for `beginWith`). */
  private current: Turn | undefined;
  /** The named statements of this session: their names and parameter types, by text. */
  private readonly prepared = new Map<string, { name: string; types: number[] }>();

  constructor(
    private readonly db: PGliteThread,
    /** Wakes the delivery workers after a commit of deliveries (`./wake.ts`). */
    readonly wake?: WakeSignal,
  ) {}

  async init(): Promise<void> {}

  /** Waits for the session; resolves with the function that gives it to the next user. */
  async nextTurn(): Promise<() => void> {
    let release: () => void = () => {};
    const previous = this.tail;
    this.tail = new Promise<void>((resolve) => {
      release = resolve;
    });
    await previous;
    return release;
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    const release = await this.nextTurn();
    const turn: Turn = new Turn(this, () => {
      if (this.current === turn) this.current = undefined;
      release();
    });
    this.current = turn;
    return turn;
  }

  /** See {@link PGliteDialect.beginWith}. */
  beginWith(settings: string): boolean {
    const turn = this.current;
    if (!turn?.beginPending) return false;
    turn.beginText = `begin; ${settings}`;
    return true;
  }

  /** Sends a batch of protocol messages (with the turn's pending `begin` before it, if any). */
  send(bytes: Uint8Array, turn?: Turn): Promise<{ messages: BackendMessage[] }> {
    return this.db.execProtocol(
      turn?.beginPending ? concat(protocol.serialize.query(turn.takeBegin()), bytes) : bytes,
    );
  }

  /**
   * Runs one statement for `turn`: a marked one as a named prepared statement (prepared on its
   * first run, then bound and run), any other as the unnamed statement, described first for its
   * parameters' types. `sent` is called once the statement's last message is sent.
   */
  async run<R>(
    turn: Turn,
    text: string,
    parameters: readonly unknown[],
    sent: () => void,
  ): Promise<Results<R>> {
    const { serialize } = protocol;
    const named =
      text.startsWith(PREPARED_MARK) && (this.prepared.has(text) || this.prepared.size < MAX_PREPARED);
    let statement = named ? this.prepared.get(text) : undefined;
    if (statement === undefined) {
      const name = named ? `payhook_${this.prepared.size + 1}` : '';
      const { messages } = await this.send(
        concat(
          serialize.parse({ name, text, types: [] }),
          serialize.describe({ type: 'S', name }),
          serialize.sync(),
        ),
        turn,
      );
      const description = messages.find((m) => m.name === 'parameterDescription') as
        | { dataTypeIDs: number[] }
        | undefined;
      statement = { name, types: description?.dataTypeIDs ?? [] };
      if (named) this.prepared.set(text, statement);
    }
    const { types } = statement;
    const values = parameters.map((value, i) => {
      if (value === null || value === undefined) return null;
      const serializer = this.db.serializers[types[i] as number];
      return serializer ? serializer(value) : String(value);
    });
    const answer = this.send(
      concat(
        serialize.bind({ statement: statement.name, values }),
        serialize.describe({ type: 'P' }),
        serialize.execute({}),
        serialize.sync(),
      ),
      turn,
    );
    sent();
    const { messages } = await answer;
    // A begin's own answers (its command, ready for query) come first: the statement's last.
    return parse.parseResults(messages, this.db.parsers).at(-1) as Results<R>;
  }

  async beginTransaction(connection: DatabaseConnection): Promise<void> {
    const turn = connection as Turn;
    turn.inTransaction = true;
    turn.beginPending = true;
    turn.marked = false;
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await (connection as Turn).end('commit');
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await (connection as Turn).end('rollback');
  }

  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    (connection as Turn).release();
  }

  async destroy(): Promise<void> {
    await this.db.close();
  }
}
