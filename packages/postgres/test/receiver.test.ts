// @module-tag postgres
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import {
  createReceiver,
  type HandlerContext,
  type Receiver,
  type ReceiverOptions,
  type ReceiverRequest,
  silentLogger,
} from '@payhook/core';
import { createTestEvent } from '@payhook/core/testing';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresStore, type PostgresStore, pgTransaction } from '../src/index.js';
import { connect, dropSchemas, randomSchema } from './postgres.js';

// The receiver's promises with the PostgreSQL store: acknowledge first, effects and done mark in one
// transaction (rolled back on a throw, a timeout, a lost lease), retries, dead letters and replay,
// the bounded queue, drain on close, stats, metrics and traces.

const BIZ = '3a9c1f7e-2b4d-4e6f-8a1b-5c7d9e0f2a3b';
let pool: pg.Pool;
const schemas: string[] = [];
const receivers: Receiver[] = [];

beforeAll(async () => {
  pool = await connect();
});
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((receiver) => receiver.close()));
});
afterAll(async () => {
  await dropSchemas(pool, schemas);
  await pool.end();
});

/** A store on a fresh schema, with the merchant's `effects` table beside its inbox. */
async function setup(): Promise<{ store: PostgresStore; effects: string }> {
  const schema = randomSchema();
  schemas.push(schema);
  const store = createPostgresStore({ pool, schema });
  await store.migrate();
  const effects = `"${schema}".effects`;
  await pool.query(`CREATE TABLE ${effects} (event_key text NOT NULL, attempt int NOT NULL)`);
  return { store, effects };
}

function receiverOn(store: PostgresStore, options: Partial<ReceiverOptions> = {}): Receiver {
  const receiver = createReceiver({
    businessIds: [BIZ],
    allowAnyIp: true,
    store,
    recoveryIntervalMs: 0,
    logger: silentLogger,
    retry: { attempts: 2, minDelayMs: 5, maxDelayMs: 10 },
    ...options,
  });
  receivers.push(receiver);
  return receiver;
}

const request = (body: unknown): ReceiverRequest => ({
  method: 'POST',
  contentType: 'application/json',
  remoteAddress: '127.0.0.1',
  rawBody: JSON.stringify(body),
});

/** Posts an event and starts its processing, as an adapter does once the response is written. */
async function deliver(receiver: Receiver, event: unknown) {
  const result = await receiver.handle(request(event));
  result.afterResponse?.();
  return result;
}

const write = (effects: string) => async (context: HandlerContext) => {
  await pgTransaction(context).query(`INSERT INTO ${effects} VALUES ($1, $2)`, [
    context.key,
    context.attempt,
  ]);
};

const rows = async (effects: string) =>
  (await pool.query<{ event_key: string; attempt: number }>(`SELECT * FROM ${effects} ORDER BY attempt`))
    .rows;

describe('a receiver on the PostgreSQL store', () => {
  it('acknowledges before the handler runs, and commits its write with the done mark', async () => {
    const { store, effects } = await setup();
    const receiver = receiverOn(store);
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    receiver.onAny(async (_event, context) => {
      await write(effects)(context);
      await gate;
    });
    const event = createTestEvent('payment.session.succeeded', BIZ);
    const key = `${BIZ}:${event.checksum.toLowerCase()}`;
    const result = await deliver(receiver, event);
    expect(result.status).toBe(200);
    // Acknowledged, in the inbox, and its write not visible until the commit.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await store.get(key)).toMatchObject({ state: 'processing' });
    expect(await rows(effects)).toEqual([]);
    expect((await deliver(receiver, event)).body).toMatchObject({ duplicate: true });
    release();
    await receiver.idle();
    expect(await store.get(key)).toMatchObject({ state: 'done' });
    expect(await rows(effects)).toEqual([{ event_key: key, attempt: 1 }]);
    expect((await deliver(receiver, event)).body).toMatchObject({ duplicate: true });
  });

  it('rolls back a throwing attempt: only the retry that passes leaves its write', async () => {
    const { store, effects } = await setup();
    const handled: { attempt: number; ok: boolean }[] = [];
    const receiver = receiverOn(store, {
      metrics: { onHandled: ({ attempt, ok }) => handled.push({ attempt, ok }) },
    });
    receiver.onAny(async (_event, context) => {
      await write(effects)(context);
      if (context.attempt === 1) throw new Error('the first attempt fails after its write');
    });
    const event = createTestEvent('payment.session.succeeded', BIZ);
    await deliver(receiver, event);
    await receiver.idle();
    expect(await rows(effects)).toEqual([
      { event_key: `${BIZ}:${event.checksum.toLowerCase()}`, attempt: 2 },
    ]);
    expect(handled).toEqual([
      { attempt: 1, ok: false },
      { attempt: 2, ok: true },
    ]);
  });

  it('dead-letters after every attempt failed, with nothing written, and replay() commits the next run', async () => {
    const { store, effects } = await setup();
    const receiver = receiverOn(store);
    let healthy = false;
    const letters: string[] = [];
    receiver.onAny(async (_event, context) => {
      await write(effects)(context);
      if (!healthy) throw new Error('down');
    });
    receiver.onDeadLetter((letter) => {
      letters.push(letter.key);
    });
    const event = createTestEvent('payment.session.succeeded', BIZ);
    const key = `${BIZ}:${event.checksum.toLowerCase()}`;
    await deliver(receiver, event);
    await receiver.idle();
    expect(letters).toEqual([key]);
    expect(await store.get(key)).toMatchObject({ state: 'failed', error: 'Error: down' });
    expect(await rows(effects)).toEqual([]);
    healthy = true;
    expect(await receiver.replay(key)).toMatchObject({ status: 'replayed' });
    await receiver.idle();
    expect(await store.get(key)).toMatchObject({ state: 'done' });
    expect(await rows(effects)).toHaveLength(1);
  });

  it('rolls back an attempt past the handler timeout, and closes its connection', async () => {
    const { store, effects } = await setup();
    const receiver = receiverOn(store, { handlerTimeoutMs: 100, retry: { attempts: 1 } });
    receiver.onAny(async (_event, context) => {
      await write(effects)(context);
      await new Promise((resolve) => setTimeout(resolve, 300));
    });
    const event = createTestEvent('payment.session.succeeded', BIZ);
    await deliver(receiver, event);
    await receiver.idle();
    expect(await store.get(`${BIZ}:${event.checksum.toLowerCase()}`)).toMatchObject({ state: 'failed' });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await rows(effects)).toEqual([]);
  });

  it('rolls back when the lease passed to another instance before the commit', async () => {
    const { store, effects } = await setup();
    const receiver = receiverOn(store, { leaseMs: 60_000 });
    const event = createTestEvent('payment.session.succeeded', BIZ);
    const key = `${BIZ}:${event.checksum.toLowerCase()}`;
    receiver.onAny(async (_event, context) => {
      await write(effects)(context);
      // Another instance takes the event over meanwhile (its lease made to lapse at once).
      await pool.query(`UPDATE ${store.table} SET owner = 'other', lease_until = 0 WHERE key = $1`, [key]);
    });
    await deliver(receiver, event);
    await receiver.idle();
    expect(await rows(effects)).toEqual([]);
    expect(await store.get(key)).toMatchObject({ state: 'processing', owner: 'other' });
  });

  it('answers 503 queue_full past maxQueuedEvents, and close() drains the running event to its commit', async () => {
    const { store, effects } = await setup();
    const receiver = receiverOn(store, { maxQueuedEvents: 1 });
    receiver.onAny(async (_event, context) => {
      await write(effects)(context);
      await new Promise((resolve) => setTimeout(resolve, 150));
    });
    await deliver(receiver, createTestEvent('payment.session.succeeded', BIZ));
    const full = await deliver(receiver, createTestEvent('payment.session.succeeded', BIZ));
    expect(full.status).toBe(503);
    expect(full.body).toMatchObject({ error: { code: 'queue_full' } });
    expect(receiver.stats()).toMatchObject({ held: 1 });
    receivers.splice(receivers.indexOf(receiver), 1);
    await receiver.close();
    expect(await rows(effects)).toHaveLength(1);
    expect(receiver.stats()).toMatchObject({ held: 0, running: 0 });
  });

  it('recovers an event whose owner died, and runs it in a transaction of its own', async () => {
    const { store, effects } = await setup();
    const event = createTestEvent('payment.session.succeeded', BIZ);
    const key = `${BIZ}:${event.checksum.toLowerCase()}`;
    await store.claim(key, { owner: 'dead', leaseMs: 1, payload: JSON.stringify(event), businessId: BIZ });
    await new Promise((resolve) => setTimeout(resolve, 10));
    const receiver = receiverOn(store);
    receiver.onAny((_event, context) => write(effects)(context));
    expect(await receiver.recover()).toBe(1);
    await receiver.idle();
    expect(await rows(effects)).toEqual([{ event_key: key, attempt: 1 }]);
    expect(await store.get(key)).toMatchObject({ state: 'done', attempts: 2 });
  });

  it('traces each attempt with a span around its handlers, inside the transaction', async () => {
    const { store, effects } = await setup();
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const contextManager = new AsyncLocalStorageContextManager().enable();
    context.setGlobalContextManager(contextManager);
    try {
      const receiver = receiverOn(store, { tracing: { tracer: provider.getTracer('payhook') } });
      const spanIds: (string | undefined)[] = [];
      receiver.onAny(async (_event, handlerContext) => {
        spanIds.push(trace.getActiveSpan()?.spanContext().spanId);
        await write(effects)(handlerContext);
        if (handlerContext.attempt === 1) throw new Error('rolled back');
      });
      await deliver(receiver, createTestEvent('payment.session.succeeded', BIZ));
      await receiver.idle();
      const spans = exporter.getFinishedSpans().filter((span) => span.name.startsWith('payhook.handle '));
      expect(spans.map((span) => span.attributes['payhook.outcome'])).toEqual(['retrying', 'processed']);
      expect(spanIds).toEqual(spans.map((span) => span.spanContext().spanId));
      expect(await rows(effects)).toHaveLength(1);
    } finally {
      context.disable();
      await provider.shutdown();
    }
  });
});
