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
/** How long a close waits for the turns taken before it to send their messages, in ms. */
const CLOSE_WAIT_MS = 5_000;

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
 *
 * With `waitLimitMs`, the dialect's users (the API's) wait at most that long for the database, as
 * for a pooled PostgreSQL connection: a user that would wait longer for its turn, or that comes
 * while the thread's oldest unanswered message has waited longer, fails with
 * {@link PGliteBusyError} (the API's 503) before it sends anything. The views of `withSettings`
 * (the delivery worker's) always wait their turn.
 */
export function pgliteDialect(
  db: PGliteThread,
  wake?: WakeSignal,
  options: { waitLimitMs?: number | undefined } = {},
): PGliteDialect {
  const session = new PGliteSession(db, wake);
  const view = (settings?: Record<string, string>): Dialect => ({
    createAdapter: () => new PostgresAdapter(),
    createDriver: () =>
      new PGliteDriver(
        session,
        settings && statementSettings(settings),
        settings ? undefined : options.waitLimitMs,
      ),
    createIntrospector: (kysely: Kysely<unknown>) => new PostgresIntrospector(kysely),
    createQueryCompiler: () => new PostgresQueryCompiler(),
  });
  return { ...view(), withSettings: view };
}

/** The PGlite dialect, and views of the same session with settings of their own. */
export interface PGliteDialect extends Dialect {
  /**
   * A dialect over the same session (the same turns, one connection) whose every statement runs
   * with `settings` (`name: value`): set before it and reset after it, in the statement's own
   * message, so no other user's statement runs under them. Each statement commits on its own, as
   * on a PostgreSQL pool with the settings as connection options.
   */
  withSettings(settings: Record<string, string>): Dialect;
}

/**
 * The embedded database could not take a statement within the wait limit (`pgliteDialect`'s
 * `waitLimitMs`, the sender's `PAYHOOK_DB_ACQUIRE_TIMEOUT_MS`): more work is queued on its thread
 * than it gets through in that time. Nothing of the statement was sent. Its `code` counts as the
 * database being unavailable (`isDatabaseUnavailable`): the API answers 503 with a Retry-After.
 */
export class PGliteBusyError extends Error {
  override name = 'PGliteBusyError';
  readonly code = 'PGLITE_BUSY';
}

/** The messages around a statement run with settings of its own. */
interface StatementSettings {
  set: Uint8Array;
  reset: Uint8Array;
}

function statementSettings(settings: Record<string, string>): StatementSettings {
  const names = Object.keys(settings);
  for (const name of names)
    if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new TypeError(`Invalid setting name: ${name}`);
  return {
    set: protocol.serialize.query(
      names.map((name) => `set ${name} = '${String(settings[name]).replaceAll("'", "''")}'`).join('; '),
    ),
    reset: protocol.serialize.query(names.map((name) => `reset ${name}`).join('; ')),
  };
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
  /** A statement of the transaction wrote due deliveries: wake the workers once it commits. */
  marked = false;
  /** Whether this turn still holds the session (until its last message is sent). */
  private held = true;

  constructor(
    private readonly session: PGliteSession,
    private readonly settings: StatementSettings | undefined,
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
    this.releaseTurn = await this.session.nextTurn();
    this.held = true;
  }

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    await this.hold();
    const inTransaction = this.inTransaction;
    // Outside a transaction, the turn ends with the statement's last message.
    const sent = inTransaction ? () => {} : () => this.release();
    let result: Results<R>;
    try {
      result = await this.session.run<R>(this, query.sql, query.parameters as unknown[], this.settings, sent);
    } finally {
      sent();
    }
    if (marksWake(result.rows)) {
      if (inTransaction) this.marked = true;
      else this.session.wake?.fire();
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

  /** Takes the pending `begin`: the transaction is begun by whoever sends it. */
  takeBegin(): string {
    this.beginPending = false;
    return 'begin';
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
    const answer = this.session.send(protocol.serialize.query(text));
    this.release();
    await answer;
    if (wake) this.session.wake?.fire();
  }
}

/** The one PGlite session: its turns, its named statements, and the wake-ups of its commits. */
class PGliteSession {
  private tail: Promise<void> = Promise.resolve();
  /** The named statements of this session: their names and parameter types, by text. */
  private readonly prepared = new Map<string, { name: string; types: number[] }>();

  constructor(
    private readonly db: PGliteThread,
    /** Wakes the delivery workers after a commit of deliveries (`./wake.ts`). */
    readonly wake?: WakeSignal,
  ) {}

  /**
   * Closes PGlite once every turn taken so far has sent its messages (they are answered first),
   * or after {@link CLOSE_WAIT_MS} if one still holds the session (what it sends after fails).
   */
  async close(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.nextTurn().then((release) => release()),
      new Promise((resolve) => {
        timer = setTimeout(resolve, CLOSE_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
    await this.db.close();
  }

  /**
   * Waits for the session; resolves with the function that gives it to the next user. Past
   * `limitMs`, fails with {@link PGliteBusyError} instead; the turn it waited for then passes on
   * to the next user as soon as it comes.
   */
  async nextTurn(limitMs?: number): Promise<() => void> {
    let release: () => void = () => {};
    const previous = this.tail;
    this.tail = new Promise<void>((resolve) => {
      release = resolve;
    });
    if (limitMs === undefined) {
      await previous;
      return release;
    }
    let timer: NodeJS.Timeout | undefined;
    const came = await Promise.race([
      previous.then(() => true),
      new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), limitMs);
      }),
    ]);
    clearTimeout(timer);
    if (came) return release;
    void previous.then(release);
    throw new PGliteBusyError(
      `The embedded database did not take the statement within ${limitMs} ms: its session was in use all that time.`,
    );
  }

  /**
   * Fails with {@link PGliteBusyError} when the thread's oldest unanswered message has waited
   * more than `limitMs`: a statement sent now would wait longer than that.
   */
  checkBacklog(limitMs: number): void {
    const waited = this.db.oldestWaitMs();
    if (waited > limitMs) {
      throw new PGliteBusyError(
        `The embedded database is behind: its oldest unanswered statement was sent ${Math.round(waited)} ms ago, more than the ${limitMs} ms a statement may wait.`,
      );
    }
  }

  /** Sends a batch of protocol messages (with the turn's pending `begin` before it, if any). */
  send(bytes: Uint8Array, turn?: Turn): Promise<{ messages: BackendMessage[] }> {
    return this.db.execProtocol(
      turn?.beginPending ? concat(protocol.serialize.query(turn.takeBegin()), bytes) : bytes,
    );
  }

  /** Resets a statement's settings after it failed before its last message (a copy: what is sent is handed over). */
  private reset(settings: StatementSettings): void {
    void this.send(settings.reset.slice()).catch(() => {});
  }

  /**
   * Runs one statement for `turn`: a marked one as a named prepared statement (prepared on its
   * first run, then bound and run), any other as the unnamed statement, described first for its
   * parameters' types; with `settings`, between their set and reset. `sent` is called once the
   * statement's last message is sent.
   */
  async run<R>(
    turn: Turn,
    text: string,
    parameters: readonly unknown[],
    settings: StatementSettings | undefined,
    sent: () => void,
  ): Promise<Results<R>> {
    const { serialize } = protocol;
    const named =
      text.startsWith(PREPARED_MARK) && (this.prepared.has(text) || this.prepared.size < MAX_PREPARED);
    let statement = named ? this.prepared.get(text) : undefined;
    // A simple query drops the unnamed statement: for it, the settings go before its parse.
    const setFirst = settings !== undefined && !named;
    if (statement === undefined) {
      const name = named ? `payhook_${this.prepared.size + 1}` : '';
      let messages: BackendMessage[];
      try {
        ({ messages } = await this.send(
          concat(
            setFirst ? settings.set : new Uint8Array(),
            serialize.parse({ name, text, types: [] }),
            serialize.describe({ type: 'S', name }),
            serialize.sync(),
          ),
          turn,
        ));
      } catch (error) {
        if (setFirst) this.reset(settings);
        throw error;
      }
      const description = messages.find((m) => m.name === 'parameterDescription') as
        | { dataTypeIDs: number[] }
        | undefined;
      statement = { name, types: description?.dataTypeIDs ?? [] };
      if (named) this.prepared.set(text, statement);
    }
    const { types } = statement;
    let values: (string | null)[];
    try {
      values = parameters.map((value, i) => {
        if (value === null || value === undefined) return null;
        const serializer = this.db.serializers[types[i] as number];
        return serializer ? serializer(value) : String(value);
      });
    } catch (error) {
      // A value its type cannot take: the statement is not sent, and the settings sent before its
      // parse are reset now.
      if (setFirst) this.reset(settings);
      throw error;
    }
    // The answers of what comes before the statement (a pending begin, the settings) each end
    // with a ready-for-query: the statement's own answers are those after them.
    const setHere = settings !== undefined && !setFirst;
    const before = (turn.beginPending ? 1 : 0) + (setHere ? 1 : 0);
    const answer = this.send(
      concat(
        setHere ? settings.set : new Uint8Array(),
        serialize.bind({ statement: statement.name, values }),
        serialize.describe({ type: 'P' }),
        serialize.execute({}),
        serialize.sync(),
        settings?.reset ?? new Uint8Array(),
      ),
      turn,
    );
    sent();
    const { messages } = await answer;
    return parse.parseResults(answerOf(messages, before), this.db.parsers).at(-1) as Results<R>;
  }
}

/**
 * The messages of one exchange of a batch: the one after the first `skip` (each exchange ends with
 * a ready-for-query), without those after it (settings reset).
 */
function answerOf(messages: BackendMessage[], skip: number): BackendMessage[] {
  let start = 0;
  let seen = 0;
  while (start < messages.length && seen < skip) if (messages[start++]?.name === 'readyForQuery') seen++;
  let end = start;
  while (end < messages.length && messages[end]?.name !== 'readyForQuery') end++;
  return messages.slice(start, end + 1);
}

class PGliteDriver implements Driver {
  constructor(
    private readonly session: PGliteSession,
    /** Set around each statement of this driver (see {@link PGliteDialect.withSettings}). */
    private readonly settings?: StatementSettings,
    /** How long a user may wait for the database (see {@link pgliteDialect}); none: no limit. */
    private readonly waitLimitMs?: number,
  ) {}

  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    const limit = this.waitLimitMs;
    if (limit !== undefined) this.session.checkBacklog(limit);
    return new Turn(this.session, this.settings, await this.session.nextTurn(limit));
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

  /** Closes PGlite; a view with settings of its own leaves that to the session's own dialect. */
  async destroy(): Promise<void> {
    if (!this.settings) await this.session.close();
  }
}
