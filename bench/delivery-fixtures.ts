/**
 * What the delivery benchmarks share: the local webhook receiver they post to, in a child process
 * of its own (this file, run with `receive`, so that it does not share the sender's event loop),
 * and the bulk insert of queued deliveries.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { createTestPayment } from '@payhook/core/testing';
import { type Database, signedPayload } from '@payhook/sender';
import { startLoopbackReceiver } from '../test/support/loopback-receiver.js';
import { BENCH_BUSINESS_ID } from './lib.js';

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
 * each, to `urls` in turn, in bulk; due at once, or from `dueAt` on, a millisecond apart. Returns
 * the bodies, in order.
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

if (process.argv[2] === 'receive') await receive();
