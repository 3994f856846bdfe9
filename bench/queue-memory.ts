/**
 * pnpm bench:queue-memory — what an acknowledged-but-unfinished event costs a receiver in memory,
 * and that the bound on such work holds. Every handler is stuck, so nothing ever finishes; 20,000
 * distinct signed events of about 1 KB (BENCH_EVENTS) go through `receiver.handle()` with the
 * memory store (the default), once with the bound raised past the flood and once with the default
 * bound (maxQueuedEvents 1,000, maxQueuedBytes 16 MiB). The heap is measured after a full
 * collection before and after each flood.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import {
  createReceiver,
  DEFAULT_MAX_QUEUED_EVENTS,
  encodeSignedEvent,
  type ReceiverOptions,
  silentLogger,
} from '@payhook/core';
import { createTestPayment } from '@payhook/core/testing';
import { BENCH_BUSINESS_ID, printTable, writeResults } from './lib.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const EVENTS = Number(process.env.BENCH_EVENTS ?? 20_000);

function makeBodies(n: number): string[] {
  const template = createTestPayment({ method: 'card', status: 'settled' });
  return Array.from({ length: n }, (_, i) => {
    const data = { ...template, id: crypto.randomUUID(), reference: `ref_${i}` };
    return encodeSignedEvent('payment.session.succeeded', data, BENCH_BUSINESS_ID);
  });
}

function heapUsed(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

async function flood(bodies: string[], options: Partial<ReceiverOptions>) {
  const receiver = createReceiver({
    businessIds: [BENCH_BUSINESS_ID],
    allowAnyIp: true,
    recoveryIntervalMs: 0,
    logger: silentLogger,
    ...options,
  });
  let release: () => void = () => {};
  const stuck = new Promise<void>((resolve) => (release = resolve));
  receiver.onAny(() => stuck);
  const before = heapUsed();
  let accepted = 0;
  let refused = 0;
  for (const rawBody of bodies) {
    const result = await receiver.handle({
      method: 'POST',
      contentType: 'application/json',
      remoteAddress: '127.0.0.1',
      rawBody,
    });
    if (result.status === 200) accepted++;
    else if (result.status === 503) refused++;
    result.afterResponse?.();
  }
  // Let the workers take what they can (they stay stuck).
  await new Promise((resolve) => setImmediate(resolve));
  const grown = heapUsed() - before;
  release();
  await receiver.close();
  return { accepted, refused, grownBytes: grown, perAcceptedBytes: accepted > 0 ? grown / accepted : 0 };
}

const bodies = makeBodies(EVENTS);
const bodyBytes = Math.round(bodies.reduce((sum, b) => sum + b.length, 0) / bodies.length);
// Warm-up: the first flood pays for compiled code and the validator.
await flood(makeBodies(2000), { maxQueuedEvents: 10_000 });

const unbounded = await flood(bodies, { maxQueuedEvents: EVENTS * 2, maxQueuedBytes: 2 ** 40 });
const bounded = await flood(bodies, {});
const kb = (n: number) => `${(n / 1024).toFixed(2)} KB`;
const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`;
console.log(`${EVENTS.toLocaleString('en-US')} distinct events of ${bodyBytes} bytes, every handler stuck\n`);
printTable(
  ['bound', 'accepted', '503 queue_full', 'heap grown', 'per accepted event'],
  [
    [
      'raised past the flood',
      String(unbounded.accepted),
      String(unbounded.refused),
      mb(unbounded.grownBytes),
      kb(unbounded.perAcceptedBytes),
    ],
    [
      `default (${DEFAULT_MAX_QUEUED_EVENTS} events)`,
      String(bounded.accepted),
      String(bounded.refused),
      mb(bounded.grownBytes),
      kb(bounded.perAcceptedBytes),
    ],
  ],
);
console.log(
  `\nheap with the default bound: ${(bounded.grownBytes / Math.max(1, unbounded.grownBytes)).toFixed(3)}x the unbounded flood's`,
);
console.log(
  `results written to ${writeResults('queue-memory', { events: EVENTS, bodyBytes, unbounded, bounded })}`,
);
