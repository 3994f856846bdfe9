import { performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { type messages, parse, protocol, type Results, types } from '@electric-sql/pglite';

/** A message of the backend, parsed. */
export type BackendMessage = messages.BackendMessage;

/** Why calls fail after {@link PGliteThread.close}. */
const CLOSED = 'PGlite is closed';

/** The answers the host thread sends (`./pglite-host.js`). */
type HostMessage =
  | { type: 'ready' }
  | { type: 'failed'; message: string }
  | { type: 'result'; id: number; data: Uint8Array }
  | { type: 'error'; id: number; message: string }
  | { type: 'closed'; id: number };

/** What a call waits for: its answer's bytes, or the thread's failure. */
interface Pending {
  resolve: (data: Uint8Array) => void;
  reject: (error: Error) => void;
  /** When it was sent (`performance.now()`). */
  sentAt: number;
}

/**
 * PGlite failed, or its thread is gone: the session and what it held are lost. Its `code` counts
 * as the database being unavailable (`isDatabaseUnavailable`): the API answers 503.
 */
export class PGliteThreadError extends Error {
  override name = 'PGliteThreadError';
  readonly code = 'PGLITE_UNAVAILABLE';
}

/**
 * The sender's embedded PGlite, run on a worker thread of its own: the WASM database no longer
 * shares the API's and the delivery worker's thread, and a machine's second core takes it
 * (docs/decisions.md, "PGlite runs on a thread of its own"). The thread speaks PostgreSQL's wire
 * protocol; this side serializes the frontend messages and parses the backend's, as a client of a
 * server would: batches of protocol messages, each sent at once and run in the order sent
 * (`execProtocol`, which throws the batch's first database error), the type serializers and
 * parsers, and the session's notifications.
 */
export class PGliteThread {
  /** Parameter serializers by type oid, with the database's array types ({@link open}). */
  readonly serializers: Record<number | string, (value: unknown) => string> = { ...types.serializers };
  /** Result parsers by type oid, with the database's array types. */
  readonly parsers: Record<number | string, (value: string, typeId?: number) => unknown> = {
    ...types.parsers,
  };
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private readonly listeners = new Map<string, Set<(payload: string) => void>>();
  private failure: PGliteThreadError | undefined;
  private readonly failureListeners = new Set<(reason: string) => void>();
  #closed = false;

  private constructor(private readonly worker: Worker) {
    // Idle, the thread does not keep the process alive (as PGlite in the process did not); a call
    // under way does (see `send`).
    worker.unref();
    worker.on('message', (message: HostMessage) => {
      if (message.type !== 'result' && message.type !== 'error' && message.type !== 'closed') return;
      const call = this.pending.get(message.id);
      this.pending.delete(message.id);
      if (this.pending.size === 0) worker.unref();
      // PGlite itself threw on a batch (its database errors come inside a result): what state that
      // left it in is unknown, so no answer of its is trusted again: the session is lost.
      if (message.type === 'error') {
        const failure = this.fail(`PGlite failed: ${message.message}`);
        call?.reject(failure);
      } else call?.resolve(message.type === 'result' ? message.data : new Uint8Array());
    });
    worker.on('error', (error) => this.fail(`PGlite failed: ${error.message}`));
    worker.on('exit', (code) => this.fail(`PGlite failed: its thread exited (code ${code})`));
  }

  /**
   * Starts PGlite on a new thread over `dataDir` and waits until it is ready. The caller holds the
   * directory's lock (`./lock.ts`): the thread is this process's.
   */
  static async open(dataDir: string): Promise<PGliteThread> {
    const worker = new Worker(new URL('./pglite-host.js', import.meta.url), { workerData: { dataDir } });
    await new Promise<void>((resolve, reject) => {
      const failed = (error: Error) => {
        worker.off('message', answered);
        reject(error);
      };
      const answered = (message: HostMessage) => {
        worker.off('error', failed);
        if (message.type === 'ready') resolve();
        else if (message.type === 'failed') reject(new PGliteThreadError(message.message));
      };
      const exited = (code: number) => failed(new PGliteThreadError(`PGlite's thread exited (code ${code})`));
      worker.once('message', answered);
      worker.once('error', failed);
      worker.once('exit', exited);
    }).finally(() => worker.removeAllListeners('exit'));
    const thread = new PGliteThread(worker);
    try {
      await thread.initArrayTypes();
    } catch (error) {
      await thread.close();
      throw error;
    }
    return thread;
  }

  /**
   * How long the oldest call still unanswered has waited, in ms (0 with none): the thread runs
   * its calls in the order sent, so a call sent now waits at least this long behind them.
   */
  oldestWaitMs(): number {
    for (const call of this.pending.values()) return performance.now() - call.sentAt;
    return 0;
  }

  /** Whether {@link close} was called or the thread is gone. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Calls `listener` once if PGlite fails or its thread dies before {@link close} (not at a
   * close). Returns the function that stops the call.
   */
  onFailure(listener: (reason: string) => void): () => void {
    this.failureListeners.add(listener);
    return () => {
      this.failureListeners.delete(listener);
    };
  }

  /**
   * Marks the session lost: every call under way and to come fails with this error, and the
   * thread is ended (a PGlite that failed would hold its memory until the process ends).
   */
  private fail(reason: string): PGliteThreadError {
    if (!this.failure) {
      this.failure = new PGliteThreadError(reason);
      this.#closed = true;
      for (const call of this.pending.values()) call.reject(this.failure);
      this.pending.clear();
      void this.worker.terminate();
      if (reason !== CLOSED) for (const listener of this.failureListeners) listener(reason);
      this.failureListeners.clear();
    }
    return this.failure;
  }

  /** Sends one batch of frontend messages; resolves with the backend's bytes. */
  private send(bytes: Uint8Array, close = false): Promise<Uint8Array> {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId++;
    if (this.pending.size === 0) this.worker.ref();
    return new Promise<Uint8Array>((resolve, reject) => {
      this.pending.set(id, { resolve, reject, sentAt: performance.now() });
      if (close) this.worker.postMessage({ id, close: true });
      else {
        // Handed over, not copied; a view of a larger buffer is copied first (cloning a view
        // would copy all of its buffer, and handing that over would take it from its owner).
        const own =
          bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : bytes.slice();
        this.worker.postMessage({ id, bytes: own }, [own.buffer as ArrayBuffer]);
      }
    });
  }

  /**
   * Runs a batch of protocol messages (ending with a sync) and returns the backend's messages.
   * Throws the batch's first database error, as PGlite's own `execProtocol` does; notifications
   * in the answer go to their listeners. `bytes` may be handed to the thread: not usable after.
   */
  async execProtocol(bytes: Uint8Array): Promise<{ messages: BackendMessage[] }> {
    const data = await this.send(bytes);
    const messages: BackendMessage[] = [];
    let error: Error | undefined;
    new protocol.Parser().parse(data, (message) => {
      if (error) return;
      if (message instanceof protocol.messages.DatabaseError) error = message;
      else if (message instanceof protocol.messages.NotificationResponseMessage)
        this.notify(message.channel, message.payload);
      else messages.push(message);
    });
    if (error) throw error;
    return { messages };
  }

  /**
   * Statements without parameters, in one simple query (several may be separated by `;`), sent
   * now: among other users' messages, only before the session is shared (`./pglite-pool.ts` owns
   * it after).
   */
  async exec(text: string): Promise<Results[]> {
    const { messages } = await this.execProtocol(protocol.serialize.query(text));
    return parse.parseResults(messages, this.parsers);
  }

  /**
   * Calls `callback` with each NOTIFY's payload on `channel` once the session listens to it (the
   * caller sends `LISTEN`, in its turn). PGlite is one session: a notification comes with the
   * answer to the commit that sent it. Returns the function that stops the calls.
   */
  onNotification(channel: string, callback: (payload: string) => void): () => void {
    let callbacks = this.listeners.get(channel);
    if (!callbacks) {
      callbacks = new Set();
      this.listeners.set(channel, callbacks);
    }
    callbacks.add(callback);
    return () => {
      callbacks.delete(callback);
    };
  }

  private notify(channel: string, payload: string): void {
    for (const callback of this.listeners.get(channel) ?? []) queueMicrotask(() => callback(payload));
  }

  /**
   * Closes PGlite (its files are consistent after) and ends the thread. What was sent before is
   * answered first; a call made after fails with {@link PGliteThreadError}.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    try {
      await this.send(new Uint8Array(), true);
    } finally {
      this.fail(CLOSED);
      await this.worker.terminate();
    }
  }

  /**
   * Array types' serializers and parsers, for the types the database has (as PGlite does when it
   * opens): an array parameter is sent as its text form, an array column read into an array.
   */
  private async initArrayTypes(): Promise<void> {
    const [result] = await this.exec(
      `select b.oid, b.typarray from pg_catalog.pg_type a
       left join pg_catalog.pg_type b on b.oid = a.typelem
       where a.typcategory = 'A' group by b.oid, b.typarray order by b.oid`,
    );
    for (const { oid, typarray } of (result?.rows ?? []) as { oid: number; typarray: number }[]) {
      this.serializers[typarray] = (value) => types.arraySerializer(value, this.serializers[oid], typarray);
      this.parsers[typarray] = (value) =>
        types.arrayParser(value, this.parsers[oid] as types.Parser, typarray);
    }
  }
}

/** Protocol messages sent as one buffer: one trip to the thread rather than one each. */
export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}
