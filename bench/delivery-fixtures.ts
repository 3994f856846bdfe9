/**
 * What the delivery benchmarks share: the local webhook receiver they post to, in a child process
 * of its own (this file, run with `receive`, so that it does not share the sender's event loop),
 * the bulk insert of queued deliveries, the worker's run, and the bare undici loop (the limit) with
 * the headers the worker sends.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { generateSigningSecret, parseSigningSecret, signWebhook } from '@payhook/core';
import { createTestPayment } from '@payhook/core/testing';
import { createDeliveryClient, createDeliveryWorker, type Database, signedPayload } from '@payhook/sender';
import { startLoopbackReceiver } from '../test/support/loopback-receiver.js';
import { BENCH_BUSINESS_ID, ownCpu, postgresCpu } from './lib.js';

/** How long the receiver takes to answer a request whose path starts with `/slow`, in ms. */
export const SLOW_MS = 50;

const EVENT_TYPE = 'payment.session.succeeded';

/**
 * Child process: the receiver. Drains each body and answers 200 with a tiny body, at once or, under
 * `/slow`, after {@link SLOW_MS}. Prints its port; prints the requests it answered on SIGTERM.
 */
async function receive(): Promise<void> {
  const ok = { status: 200, body: 'ok', headers: { 'content-type': 'text/plain', 'content-length': '2' } };
  const slow = { ...ok, delayMs: SLOW_MS };
  const receiver = await startLoopbackReceiver({
    path: '/',
    record: false,
    respond: (request) => (request.url.startsWith('/slow') ? slow : ok),
  });
  receiver.server.keepAliveTimeout = 60_000;
  process.stdout.write(`${JSON.stringify({ port: receiver.port })}\n`);
  process.once('SIGTERM', () => {
    process.stdout.write(`${JSON.stringify({ requests: receiver.requests })}\n`);
    process.exit(0);
  });
}

/** Starts the receiver on 127.0.0.1 in a child process (it inherits the environment). */
export async function startReceiver(): Promise<{
  /** `http://127.0.0.1:<port>`: any path is answered. */
  origin: string;
  /** Stops the receiver and returns how many requests it answered. */
  stop(): Promise<number>;
}> {
  const child: ChildProcess = spawn(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(import.meta.url), 'receive'],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream })[Symbol.asyncIterator]();
  const next = async () => {
    const line = await lines.next();
    if (line.done) throw new Error('the receiver closed its output');
    return JSON.parse(line.value);
  };
  const { port } = (await next()) as { port: number };
  return {
    origin: `http://127.0.0.1:${port}`,
    async stop() {
      const counted = next() as Promise<{ requests: number }>;
      child.kill('SIGTERM');
      return (await counted).requests;
    },
  };
}

/**
 * Inserts `count` events (each the signed ~1 KB payload of a realistic payment) with one delivery
 * each, to `urls` in turn, in bulk; due at once, or from `dueAt` on, a millisecond apart. With no
 * URL, the events alone (what `payhook listen` streams). Returns the bodies, in order.
 */
export async function queueDeliveries(
  database: Database,
  urls: readonly string[],
  count: number,
  dueAt?: Date,
): Promise<string[]> {
  const bodies: string[] = [];
  for (let offset = 0; offset < count; offset += 500) {
    const events = Array.from({ length: Math.min(500, count - offset) }, () => {
      const payload = signedPayload(EVENT_TYPE, createTestPayment({ status: 'settled' }), BENCH_BUSINESS_ID);
      bodies.push(payload);
      return {
        id: randomUUID(),
        business_id: BENCH_BUSINESS_ID,
        mode: 'test' as const,
        type: EVENT_TYPE,
        payment_id: null,
        payload,
      };
    });
    await database.db.insertInto('events').values(events).execute();
    if (urls.length === 0) continue;
    await database.db
      .insertInto('deliveries')
      .values(
        events.map((e, i) => ({
          event_id: e.id,
          url: urls[(offset + i) % urls.length] as string,
          ...(dueAt ? { next_attempt_at: new Date(dueAt.getTime() + offset + i) } : {}),
        })),
      )
      .execute();
  }
  return bodies;
}

/**
 * The worker: `runDue()` over every pending row, `concurrency` attempts in flight (per URL too:
 * the default per-URL limit of 4 would cap a benchmark with one receiver URL); returns
 * deliveries/s and the CPU each cost this process and, where it can be read, PostgreSQL.
 */
export async function workerRun(database: Database, count: number, concurrency: number) {
  const client = createDeliveryClient({ allowPrivate: true });
  const worker = createDeliveryWorker({
    database,
    client,
    concurrency,
    perUrlConcurrency: concurrency,
  });
  const cpu0 = ownCpu();
  const pg0 = postgresCpu();
  const t0 = performance.now();
  const made = await worker.runDue();
  const seconds = (performance.now() - t0) / 1000;
  const cpuUs = (ownCpu() - cpu0) / made;
  const pg1 = postgresCpu();
  await worker.stop();
  await client.close();
  if (made !== count) throw new Error(`the worker made ${made} attempts, expected ${count}`);
  return {
    perSecond: made / seconds,
    cpuUs,
    postgresCpuUs: pg0 === undefined || pg1 === undefined ? undefined : (pg1 - pg0) / made,
  };
}

/** The few undici calls the bare loop makes (undici is loaded from the sender's dependencies). */
interface Undici {
  Agent: new (options?: { connections?: number | null }) => { close(): Promise<void> };
  request(
    url: string,
    options: { dispatcher: unknown; method: string; headers: Record<string, string>; body: string },
  ): Promise<{ statusCode: number; body: { text(): Promise<string> } }>;
}
const requireHere = createRequire(import.meta.url);
export const undici = createRequire(requireHere.resolve('@payhook/sender/package.json'))('undici') as Undici;

export const BARE_KEY = parseSigningSecret(generateSigningSecret());

/** The plain bare loop's headers. */
export const plainHeaders = () => ({ 'content-type': 'application/json', 'user-agent': 'payhook-bench' });

/** The headers the worker sends with each attempt, signed now for this body. */
export function signedHeaders(body: string): Record<string, string> {
  const id = randomUUID();
  return {
    ...plainHeaders(),
    ...signWebhook({ id, body, secrets: [BARE_KEY] }),
    'payhook-event-id': id,
    'payhook-delivery-id': id,
    'payhook-attempt': '1',
  };
}

/** POSTs through one undici Agent, with the headers `headers` makes for each body; resolves to the status. */
export function poster(headers: (body: string) => Record<string, string> = plainHeaders) {
  const agent = new undici.Agent({ connections: null });
  return {
    async post(url: string, body: string): Promise<number> {
      const res = await undici.request(url, {
        dispatcher: agent,
        method: 'POST',
        headers: headers(body),
        body,
      });
      await res.body.text();
      return res.statusCode;
    },
    close: () => agent.close(),
  };
}

export type BareRun = { perSecond: number; failed: number; cpuUs: number };

/**
 * The bare loop: posts every body with undici, `concurrency` in flight, with the headers `headers`
 * makes for it; returns deliveries/s.
 */
export async function bareLoop(
  url: string,
  bodies: readonly string[],
  headers: (body: string) => Record<string, string> = plainHeaders,
  concurrency = 32,
): Promise<BareRun> {
  const http = poster(headers);
  let next = 0;
  let failed = 0;
  const cpu0 = ownCpu();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < bodies.length) {
        const body = bodies[next++] as string;
        if ((await http.post(url, body)) !== 200) failed++;
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const cpuUs = (ownCpu() - cpu0) / bodies.length;
  await http.close();
  return { perSecond: bodies.length / seconds, failed, cpuUs };
}

if (process.argv[2] === 'receive') await receive();

class Rollback extends Error {}

type ClaimTx = Parameters<Parameters<Database['delivery']>[0]>[0];

/**
 * Times `claim` `runs` times after 10 of warm-up, each inside a transaction that is rolled back, on
 * the worker's connections with its planner settings (on PGlite, `delivery` runs its function in
 * a transaction already). Returns the times (ms, sorted) and the rows the last run reported.
 */
export async function timedClaims(
  database: Database,
  runs: number,
  claim: (tx: ClaimTx) => Promise<number>,
): Promise<{ times: number[]; rows: number }> {
  const times: number[] = [];
  let rows = 0;
  for (let i = 0; i < runs + 10; i++) {
    const body = async (tx: ClaimTx) => {
      const t0 = performance.now();
      rows = await claim(tx);
      if (i >= 10) times.push(performance.now() - t0);
      throw new Rollback();
    };
    await database
      .delivery((db) => (db.isTransaction ? body(db) : db.transaction().execute(body)))
      .catch((error: unknown) => {
        if (!(error instanceof Rollback)) throw error;
      });
  }
  times.sort((a, b) => a - b);
  return { times, rows };
}
