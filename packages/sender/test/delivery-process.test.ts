// @module-tag postgres
// @module-tag pglite
// @module-tag process
// @module-tag build
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type LoopbackReceiver, startLoopbackReceiver } from '../../../test/support/loopback-receiver.js';
import { copyPgliteTemplate } from '../../../test/support/pglite-template.js';
import { type Database, openDatabase } from '../src/index.js';
import { sessionRequest as session } from './fixtures/requests.js';
import { type SenderProcess, spawnSender } from './fixtures/sender-process.js';
import { dropSchema, TEST_DATABASE_URL } from './fixtures/storage.js';

// The delivery worker as the service runs it: built `dist/main.js` processes (run
// `pnpm --filter @payhook/sender build` first), stopped with SIGTERM or killed with SIGKILL while
// deliveries are claimed, on PGlite and on PostgreSQL. Real receivers on loopback.

const KEY = 'sk_test_delivery_process';
const BIZ = 'biz-delivery-process';
/** The worker's default per-URL limit (main.ts does not change it): attempts in flight per URL. */
const PER_URL = 4;
const SESSIONS = 6;

/** Waits until `check()` holds, polling; fails naming `what` after `timeoutMs` (a hang guard only). */
async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The `DATABASE_URL` of a process that works in `schema`: a search_path in the startup options. */
function urlWithSchema(schema: string): string {
  const url = new URL(TEST_DATABASE_URL);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return url.toString();
}

function deliveriesIn(database: Database) {
  return database.db
    .selectFrom('deliveries')
    .select(['id', 'url', 'status', 'attempts', 'next_attempt_at', 'claim_token'])
    .orderBy('id')
    .execute();
}

/** Ids of the deliveries the receiver got, each as often as it was sent. */
const deliveryIds = (received: LoopbackReceiver['received']) =>
  received.map((r) => r.headers['payhook-delivery-id'] as string);

/** Sends beyond the first, over all deliveries: the deliveries sent twice (or more). */
const extraSends = (received: LoopbackReceiver['received']) =>
  received.length - new Set(deliveryIds(received)).size;

describe('the delivery worker in sender processes', { timeout: 180_000 }, () => {
  const processes: SenderProcess[] = [];
  const receivers: { close(): Promise<void> }[] = [];
  const dirs: string[] = [];
  const schemas: string[] = [];
  const databases: Database[] = [];

  afterEach(async () => {
    await Promise.all(processes.splice(0).map((p) => p.stop('SIGKILL')));
    await Promise.all(databases.splice(0).map((d) => d.close()));
    await Promise.all(receivers.splice(0).map((r) => r.close()));
    await Promise.all(schemas.splice(0).map(dropSchema));
    await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
  });

  async function sender(env: Record<string, string>) {
    const p = await spawnSender(
      {
        PAYHOOK_API_KEYS: `${KEY}:${BIZ}:test`,
        // The receivers listen on loopback.
        PAYHOOK_ALLOW_PRIVATE_WEBHOOKS: '1',
        ...env,
      },
      KEY,
    );
    processes.push(p);
    return p;
  }

  /** A data directory holding a migrated, empty database: the processes do not make one first. */
  async function pgliteDir() {
    const dir = await mkdtemp(join(tmpdir(), 'payhook-delivery-process-'));
    dirs.push(dir);
    await copyPgliteTemplate(join(dir, 'data'));
    return join(dir, 'data');
  }

  /** A fresh, migrated schema on the test PostgreSQL, and a connection to watch it. */
  async function postgresSchema(name: string) {
    const schema = `payhook_${name}_${process.pid}_${Date.now()}`;
    const database = await openDatabase({ url: TEST_DATABASE_URL, schema }).catch((error: Error) => {
      throw new Error(`Cannot use the test PostgreSQL at ${TEST_DATABASE_URL}: ${error.message}.`);
    });
    schemas.push(schema);
    databases.push(database);
    return { database, env: { DATABASE_URL: urlWithSchema(schema) } };
  }

  /** Registers `urls` as the business's webhook URLs. */
  async function register(p: SenderProcess, urls: string[]) {
    const res = await p.call('PATCH', '/accounts/settings', { webhook_urls: urls });
    expect(res.status).toBe(200);
  }

  async function createSessions(p: SenderProcess, n: number) {
    for (let i = 0; i < n; i++) {
      expect((await p.call('POST', '/payment-sessions', session)).status).toBe(201);
    }
  }

  /** Two URLs on one receiver: twice the per-URL limit can be in flight. */
  const twoUrls = (url: string) => [`${url}one`, `${url}two`];

  it('SIGTERM with attempts hanging past the grace: the process exits 0, every claim released and due again (PGlite)', async () => {
    const dataDir = await pgliteDir();
    const receiver = await startLoopbackReceiver({ respond: 'hang' });
    receivers.push(receiver);
    const p = await sender({
      DATABASE_URL: '',
      PAYHOOK_DATA_DIR: dataDir,
      PAYHOOK_SHUTDOWN_GRACE_SECONDS: '1',
      // A claim that stayed would be 60 s in the future: easy to tell from a released one.
      PAYHOOK_DELIVERY_LEASE_SECONDS: '60',
    });
    await register(p, twoUrls(receiver.url));
    await createSessions(p, SESSIONS);
    const inFlight = 2 * PER_URL;
    await until(`${inFlight} attempts hang at the receiver`, () => receiver.inFlight() === inFlight);
    const claimed = new Set(deliveryIds(receiver.received));
    expect(claimed.size).toBe(inFlight);

    const t0 = Date.now();
    const exit = await p.stop('SIGTERM');
    console.log(
      `SIGTERM, grace 1 s, ${inFlight} attempts hanging: the process exited after ${Date.now() - t0} ms`,
    );
    expect(exit, p.output()).toEqual({ code: 0, signal: null });
    expect(p.output()).toContain('released deliveries still in flight at shutdown');

    const database = await openDatabase({ dataDir });
    databases.push(database);
    const rows = await deliveriesIn(database);
    const checkedAt = Date.now();
    expect(rows).toHaveLength(SESSIONS * 2);
    expect(rows.filter((r) => r.claim_token !== null)).toEqual([]);
    expect(rows.map((r) => r.status)).toEqual(rows.map(() => 'pending'));
    // Released (and never claimed) deliveries are due now, not at the end of a 60 s lease.
    const notDue = rows.filter((r) => new Date(r.next_attempt_at).getTime() > checkedAt + 5000);
    expect(notDue).toEqual([]);
    expect(rows.filter((r) => claimed.has(r.id))).toHaveLength(inFlight);
  });

  it('SIGTERM with attempts that finish within the grace: they end delivered, nothing stays claimed (PGlite)', async () => {
    const dataDir = await pgliteDir();
    const receiver = await startLoopbackReceiver({ respond: 'hang' });
    receivers.push(receiver);
    const p = await sender({
      DATABASE_URL: '',
      PAYHOOK_DATA_DIR: dataDir,
      PAYHOOK_SHUTDOWN_GRACE_SECONDS: '60',
    });
    await register(p, twoUrls(receiver.url));
    await createSessions(p, SESSIONS);
    const inFlight = 2 * PER_URL;
    await until(`${inFlight} attempts are held at the receiver`, () => receiver.inFlight() === inFlight);
    const claimed = new Set(deliveryIds(receiver.received));

    p.child.kill('SIGTERM');
    await until('the process starts shutting down', () => p.output().includes('shutting down'));
    receiver.open(200);
    const exit = await p.exited;
    expect(exit, p.output()).toEqual({ code: 0, signal: null });
    expect(p.output()).not.toContain('released deliveries');

    const database = await openDatabase({ dataDir });
    databases.push(database);
    const rows = await deliveriesIn(database);
    const checkedAt = Date.now();
    expect(rows).toHaveLength(SESSIONS * 2);
    // The attempts in flight at SIGTERM finished: delivered once, not released.
    const finished = rows.filter((r) => claimed.has(r.id));
    expect(finished.map((r) => [r.status, r.attempts])).toEqual(finished.map(() => ['delivered', 1]));
    expect(rows.filter((r) => r.claim_token !== null)).toEqual([]);
    // The rest (unclaimed at SIGTERM) were either sent before the worker stopped, or wait, due.
    for (const r of rows.filter((r) => !claimed.has(r.id))) {
      if (r.status === 'delivered') continue;
      expect(r.status).toBe('pending');
      expect(new Date(r.next_attempt_at).getTime()).toBeLessThanOrEqual(checkedAt + 5000);
    }
    expect(extraSends(receiver.received)).toBe(0);
  });

  it('kill -9 with deliveries claimed on PostgreSQL: another instance delivers every one after the lease', async () => {
    const { database, env } = await postgresSchema('dproc_kill');
    const receiver = await startLoopbackReceiver({ respond: 'hang' });
    receivers.push(receiver);
    const lease = { PAYHOOK_DELIVERY_LEASE_SECONDS: '2' };
    const a = await sender({ ...env, ...lease });
    await register(a, twoUrls(receiver.url));
    await createSessions(a, SESSIONS);
    const total = SESSIONS * 2;
    const expected = 2 * PER_URL;
    await until(`${expected} attempts hang at the receiver`, () => receiver.inFlight() === expected);
    const inFlight = receiver.inFlight();
    expect(receiver.received).toHaveLength(inFlight);

    expect(await a.stop('SIGKILL')).toEqual({ code: null, signal: 'SIGKILL' });
    // A's claims stay in the table (nobody released them) until their lease ends: the attempts in
    // flight, and the rows it had claimed ahead.
    const stranded = new Set(
      (await deliveriesIn(database)).filter((r) => r.claim_token !== null).map((r) => r.id),
    );
    expect(deliveryIds(receiver.received).filter((id) => !stranded.has(id))).toEqual([]);

    receiver.respond(200);
    // Started after the kill: B cannot have taken A's claims while A held them.
    await sender({ ...env, ...lease });
    await until(`all ${total} deliveries are delivered`, async () => {
      const rows = await deliveriesIn(database);
      return rows.length === total && rows.every((r) => r.status === 'delivered');
    });
    const rows = await deliveriesIn(database);
    expect(rows.filter((r) => r.claim_token !== null)).toEqual([]);
    expect(new Set(deliveryIds(receiver.received))).toEqual(new Set(rows.map((r) => r.id)));
    const twice = extraSends(receiver.received);
    console.log(
      `kill -9 on PostgreSQL: ${total} deliveries, ${inFlight} in flight at the kill, ${twice} sent twice`,
    );
    expect(twice).toBeLessThanOrEqual(inFlight);
  });

  it('kill -9 with deliveries claimed on PGlite: the restarted process takes the stale lock over and delivers every one', async () => {
    const dataDir = await pgliteDir();
    const receiver = await startLoopbackReceiver({ respond: 'hang' });
    receivers.push(receiver);
    const env = {
      DATABASE_URL: '',
      PAYHOOK_DATA_DIR: dataDir,
      PAYHOOK_DELIVERY_LEASE_SECONDS: '2',
      PAYHOOK_SHUTDOWN_GRACE_SECONDS: '30',
    };
    const a = await sender(env);
    await register(a, twoUrls(receiver.url));
    await createSessions(a, SESSIONS);
    const total = SESSIONS * 2;
    const expected = 2 * PER_URL;
    await until(`${expected} attempts hang at the receiver`, () => receiver.inFlight() === expected);
    const inFlight = receiver.inFlight();
    expect(receiver.received).toHaveLength(inFlight);

    expect(await a.stop('SIGKILL')).toEqual({ code: null, signal: 'SIGKILL' });
    expect(existsSync(`${dataDir}.lock`)).toBe(true);

    const answered = new Set<string>();
    receiver.respond((request) => {
      answered.add(request.headers['payhook-delivery-id'] as string);
      return 200;
    });
    const b = await sender(env);
    await until(`all ${total} deliveries are answered 200`, () => answered.size === total);
    // SIGTERM lets the last attempts record their outcome (the grace), then the data can be read.
    expect(await b.stop('SIGTERM'), b.output()).toEqual({ code: 0, signal: null });

    const database = await openDatabase({ dataDir });
    databases.push(database);
    const rows = await deliveriesIn(database);
    expect(rows).toHaveLength(total);
    expect(rows.map((r) => r.status)).toEqual(rows.map(() => 'delivered'));
    expect(rows.filter((r) => r.claim_token !== null)).toEqual([]);
    expect(new Set(deliveryIds(receiver.received))).toEqual(new Set(rows.map((r) => r.id)));
    const twice = extraSends(receiver.received);
    console.log(
      `kill -9 on PGlite: ${total} deliveries, ${inFlight} in flight at the kill, ${twice} sent twice`,
    );
    expect(twice).toBeLessThanOrEqual(inFlight);
  });

  it('two instances on one PostgreSQL schema in a normal run send no delivery twice', async () => {
    const { database, env } = await postgresSchema('dproc_two');
    const receiver = await startLoopbackReceiver({ respond: 200 });
    receivers.push(receiver);
    const a = await sender(env);
    const b = await sender(env);
    await register(a, [receiver.url]);
    const total = 100;
    // Through both APIs, a few at a time: both workers are woken and claim.
    for (let i = 0; i < total; i += 10) {
      await Promise.all(
        Array.from({ length: 10 }, async (_, j) => {
          const p = (i + j) % 2 === 0 ? a : b;
          expect((await p.call('POST', '/payment-sessions', session)).status).toBe(201);
        }),
      );
    }
    await until(`all ${total} deliveries are delivered`, async () => {
      const rows = await deliveriesIn(database);
      return rows.length === total && rows.every((r) => r.status === 'delivered');
    });
    const rows = await deliveriesIn(database);
    expect(rows.map((r) => r.attempts)).toEqual(rows.map(() => 1));
    const ids = deliveryIds(receiver.received);
    expect(new Set(ids)).toEqual(new Set(rows.map((r) => r.id)));
    expect(ids).toHaveLength(total);
    // Each process counts its own attempts: together exactly one per delivery.
    const delivered = async (p: SenderProcess) => {
      const text = await (await fetch(`${p.base}/metrics`)).text();
      return Number(/^payhook_delivery_attempts_total\{outcome="delivered"\} (\d+)$/m.exec(text)?.[1] ?? 0);
    };
    const byA = await delivered(a);
    const byB = await delivered(b);
    console.log(`two instances on PostgreSQL: ${total} deliveries, sent by A ${byA}, by B ${byB}`);
    expect(byA + byB).toBe(total);
  });
});
