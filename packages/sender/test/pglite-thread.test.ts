// @module-tag pglite
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Worker } from 'node:worker_threads';
import { Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type HealthChange, isDatabaseUnavailable, oneWayHealth } from '../src/db/health.js';
import { pgliteDialect } from '../src/db/pglite-pool.js';
import { PGliteThread, PGliteThreadError } from '../src/db/pglite-thread.js';
import { PREPARE } from '../src/db/postgres.js';
import { createWakeSignal } from '../src/db/wake.js';

// PGlite runs on a worker thread of its own, and the driver gives its one session to the next user
// as soon as a turn's last message is sent, not when the answer is read. These tests run the real
// thread: that the order sent is the order run, that errors and notifications come back as from a
// server, that settings set around a statement never outlive it, and that a closed or failed
// thread fails its callers rather than leaving them waiting.

describe('PGlite on its own thread', { timeout: 60_000 }, () => {
  let dir: string;
  let thread: PGliteThread;
  let db: Kysely<Record<string, never>>;
  let planned: Kysely<Record<string, never>>;
  const wake = createWakeSignal();
  let woken = 0;
  wake.subscribe(() => woken++);

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'payhook-pglite-thread-'));
    thread = await PGliteThread.open(join(dir, 'data'));
    const dialect = pgliteDialect(thread, wake);
    db = new Kysely({ dialect });
    planned = new Kysely({ dialect: dialect.withSettings({ enable_seqscan: 'off', jit: 'off' }) });
    await sql`create table t (id int primary key, tags text[] not null default '{}')`.execute(db);
  }, 60_000);
  afterAll(async () => {
    await planned?.destroy();
    await db?.destroy();
    await rm(dir, { recursive: true, force: true });
  });

  it('runs statements and transactions in the order they were sent, each seeing the ones before', async () => {
    // None waits for the one before it: every turn is given up once its last message is sent.
    const work = Array.from({ length: 50 }, (_, i) =>
      i % 2 === 0
        ? sql`insert into t (id) values (${i})`.execute(db)
        : db.transaction().execute(async (tx) => {
            await sql`insert into t (id) values (${i})`.execute(tx);
            return (await sql<{ n: number }>`select count(*)::int as n from t`.execute(tx)).rows[0]?.n;
          }),
    );
    const results = await Promise.all(work);
    // The transaction at i counts the rows of every statement sent before it, and its own.
    results.forEach((result, i) => {
      if (i % 2 === 1) expect(result).toBe(i + 1);
    });
  });

  it('answers a database error with its code, and the session carries on', async () => {
    const duplicate = sql`insert into t (id) values (0)`.execute(db);
    const next = sql<{ n: number }>`select count(*)::int as n from t`.execute(db);
    await expect(duplicate).rejects.toMatchObject({ code: '23505' });
    expect((await next).rows).toEqual([{ n: 50 }]);
    // A transaction that fails midway is rolled back, and the next one starts clean.
    await expect(
      db.transaction().execute(async (tx) => {
        await sql`insert into t (id) values (1000)`.execute(tx);
        await sql`select 1 / 0`.execute(tx);
      }),
    ).rejects.toMatchObject({ code: '22012' });
    expect((await sql`select id from t where id = 1000`.execute(db)).rows).toEqual([]);
  });

  it('sends and reads arrays, and runs marked statements as named ones', async () => {
    const tags = ['a', 'b,c', 'd"e', ''];
    await sql`update t set tags = ${tags} where id = 2`.execute(db);
    const named = sql<{ tags: string[] }>`${sql.raw(PREPARE)}select tags from t where id = ${2}`;
    expect((await named.execute(db)).rows).toEqual([{ tags }]);
    expect((await named.execute(db)).rows).toEqual([{ tags }]);
    const ids = await sql<{
      ids: number[];
    }>`select array_agg(id order by id) as ids from t where id = any(${[2, 4]})`.execute(db);
    expect(ids.rows).toEqual([{ ids: [2, 4] }]);
  });

  it("sets a view's settings around each of its statements only, even when the statement fails", async () => {
    const seqscan = async () =>
      (await sql<{ v: string }>`select current_setting('enable_seqscan') as v`.execute(db)).rows;
    expect(
      (await sql<{ v: string }>`select current_setting('enable_seqscan') as v`.execute(planned)).rows,
    ).toEqual([{ v: 'off' }]);
    expect(await seqscan()).toEqual([{ v: 'on' }]);
    // Failing at its parse (unnamed), at its run (unnamed), before it is sent, and at its run (named).
    await expect(sql`select no_such_column from t`.execute(planned)).rejects.toMatchObject({ code: '42703' });
    expect(await seqscan()).toEqual([{ v: 'on' }]);
    await expect(sql`select 1 / 0`.execute(planned)).rejects.toMatchObject({ code: '22012' });
    expect(await seqscan()).toEqual([{ v: 'on' }]);
    // A value its type cannot take (a JSON parameter with a cycle): never sent, and reset too.
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    await expect(sql`select ${cycle}::jsonb`.execute(planned)).rejects.toThrow(TypeError);
    expect(await seqscan()).toEqual([{ v: 'on' }]);
    const named = sql`${sql.raw(PREPARE)}select 1 / ${0}::int`;
    await expect(named.execute(planned)).rejects.toMatchObject({ code: '22012' });
    await expect(named.execute(planned)).rejects.toMatchObject({ code: '22012' });
    expect(await seqscan()).toEqual([{ v: 'on' }]);
  });

  it("wakes after a commit of a marked statement, not for a rollback, and not for another turn's", async () => {
    const marked = sql`select true as payhook_wake`;
    woken = 0;
    await marked.execute(db);
    expect(woken).toBe(1);
    await db.transaction().execute(async (tx) => {
      await marked.execute(tx);
      expect(woken).toBe(1);
    });
    expect(woken).toBe(2);
    await expect(
      db.transaction().execute(async (tx) => {
        await marked.execute(tx);
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    // A marked transaction, and an unmarked one sent right behind its commit: one wake-up.
    await Promise.all([
      db.transaction().execute((tx) => marked.execute(tx)),
      db.transaction().execute((tx) => sql`select 1`.execute(tx)),
    ]);
    expect(woken).toBe(3);
  });

  it('hands notifications to their listeners with the answer to the commit that sent them', async () => {
    const payloads: string[] = [];
    const stop = thread.onNotification('payhook_test', (payload) => payloads.push(payload));
    await sql`listen payhook_test`.execute(db);
    await sql`select pg_notify('payhook_test', 'one')`.execute(db);
    await expect.poll(() => payloads).toEqual(['one']);
    stop();
    await sql`unlisten payhook_test`.execute(db);
  });
});

/** Runs `body` with a data directory of its own, removed after. */
async function inTempDir(body: (dataDir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'payhook-pglite-thread-'));
  try {
    await body(join(dir, 'data'));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

describe('a PGlite thread that cannot run', { timeout: 60_000 }, () => {
  it('closes after a bound when a transaction keeps the session, and fails what it sends after', () =>
    inTempDir(async (dataDir) => {
      const thread = await PGliteThread.open(dataDir);
      const db = new Kysely<Record<string, never>>({ dialect: pgliteDialect(thread) });
      let goOn: () => void = () => {};
      const resumed = new Promise<void>((resolve) => {
        goOn = resolve;
      });
      let began: () => void = () => {};
      const begun = new Promise<void>((resolve) => {
        began = resolve;
      });
      const held = db.transaction().execute(async (tx) => {
        await sql`select 1`.execute(tx);
        began();
        await resumed;
        await sql`select 2`.execute(tx);
      });
      held.catch(() => {});
      await begun;
      await db.destroy();
      expect(thread.closed).toBe(true);
      goOn();
      await expect(held).rejects.toBeInstanceOf(PGliteThreadError);
    }));

  it('refuses a batch that is not frontend messages, ends its thread, and fails every call after', () =>
    inTempDir(async (dataDir) => {
      const thread = await PGliteThread.open(dataDir);
      const worker = (thread as unknown as { worker: Worker }).worker;
      const exited = new Promise<number>((resolve) => worker.once('exit', resolve));
      await expect(thread.exec('select 1')).resolves.toHaveLength(1);
      // A message of a type PGlite does not know: given to it, PGlite would repeat a FATAL error
      // without end. The host refuses it; the session is then lost (what the main thread meant by
      // it is unknown), so the call sent after fails rather than waits, and the thread ends.
      worker.postMessage({ id: 0, bytes: new Uint8Array([1, 0, 0, 0, 4]) });
      const after = thread.exec('select 1');
      await expect(after).rejects.toBeInstanceOf(PGliteThreadError);
      await exited;
      expect(thread.closed).toBe(true);
      await expect(thread.exec('select 1')).rejects.toBeInstanceOf(PGliteThreadError);
      await thread.close();
    }));

  it('fails the calls under way when its thread dies, and every call after', () =>
    inTempDir(async (dataDir) => {
      const thread = await PGliteThread.open(dataDir);
      const db = new Kysely<Record<string, never>>({ dialect: pgliteDialect(thread) });
      const health = oneWayHealth((listener) => thread.onFailure(listener));
      const changes: HealthChange[] = [];
      health.onChange((change) => changes.push(change));
      const under = sql`select pg_sleep(5)`.execute(db);
      const queued = db.transaction().execute((tx) => sql`select 1`.execute(tx));
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(health.state).toBe('up');
      await (thread as unknown as { worker: Worker }).worker.terminate();
      const lost = await under.then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(lost).toBeInstanceOf(PGliteThreadError);
      // The API answers such a failure 503 database_unavailable, and /healthz says why, for good.
      expect(isDatabaseUnavailable(lost)).toBe(true);
      await expect(queued).rejects.toBeInstanceOf(PGliteThreadError);
      expect(thread.closed).toBe(true);
      expect(health.state).toBe('down');
      expect(changes).toEqual([
        { state: 'down', reason: expect.stringMatching(/exited.*restart the sender/) },
      ]);
      await expect(sql`select 1`.execute(db)).rejects.toBeInstanceOf(PGliteThreadError);
      await db.destroy();
    }));

  it('fails to open on a data directory that is a file, and leaves no thread behind', () =>
    inTempDir(async (dataDir) => {
      await writeFile(dataDir, 'not a directory');
      await expect(PGliteThread.open(dataDir)).rejects.toBeInstanceOf(PGliteThreadError);
    }));

  it('answers what was sent before a close, and fails every call after it, at once', () =>
    inTempDir(async (dataDir) => {
      const thread = await PGliteThread.open(dataDir);
      const db = new Kysely<Record<string, never>>({ dialect: pgliteDialect(thread) });
      const failures: string[] = [];
      thread.onFailure((reason) => failures.push(reason));
      const pending = sql`select count(*) from generate_series(1, 1000000)`.execute(db);
      // Its turn taken and its first message sent: a close waits for what was sent before it.
      await new Promise((resolve) => setImmediate(resolve));
      await db.destroy();
      await expect(pending).resolves.toBeDefined();
      expect(thread.closed).toBe(true);
      await expect(thread.exec('select 1')).rejects.toBeInstanceOf(PGliteThreadError);
      // A close is no failure.
      expect(failures).toEqual([]);
    }));
});
