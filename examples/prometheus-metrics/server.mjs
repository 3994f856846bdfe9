import { createReceiver, REFUSAL_REASONS } from '@payhook/core';
import { logEvents, port, receiverOptions } from '@payhook/example-shared';
import { payhook } from '@payhook/express';
import express from 'express';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

// The receiver's metrics hook mapped onto prom-client. Core itself depends on no metrics library:
// the hook is four plain callbacks, and receiver.stats() is read when Prometheus scrapes.
const register = new Registry();
const requests = new Counter({
  name: 'payhook_receiver_requests_total',
  help: 'Webhook requests by outcome (accepted, duplicate, refused) and, when refused, the error code.',
  labelNames: ['outcome', 'reason'],
  registers: [register],
});
const runs = new Histogram({
  name: 'payhook_receiver_handler_duration_seconds',
  help: "Runs of an event's handlers (each local attempt), by event type and result.",
  labelNames: ['event', 'result'],
  buckets: [0.005, 0.025, 0.1, 0.5, 1, 5, 30],
  registers: [register],
});
const retries = new Counter({
  name: 'payhook_receiver_retries_total',
  help: 'Local retries of failed handlers, by event type.',
  labelNames: ['event'],
  registers: [register],
});
const deadLetters = new Counter({
  name: 'payhook_receiver_dead_letters_total',
  help: 'Events whose handlers failed on every local attempt, by event type.',
  labelNames: ['event'],
  registers: [register],
});
const staleEvents = new Counter({
  name: 'payhook_receiver_stale_events_total',
  help: 'Events found stale under per-payment order (older in the lifecycle than one handled), by event type.',
  labelNames: ['event'],
  registers: [register],
});

const receiver = createReceiver({
  ...receiverOptions(),
  metrics: {
    onReceived: ({ outcome, reason }) => requests.inc({ outcome, reason: reason ?? '' }),
    onHandled: ({ event, durationMs, code }) =>
      runs.observe({ event, result: code ?? 'ok' }, durationMs / 1000),
    onRetry: ({ event }) => retries.inc({ event }),
    onDeadLetter: ({ event }) => deadLetters.inc({ event }),
    onStale: ({ event }) => staleEvents.inc({ event }),
  },
});
logEvents(receiver, 'express');

// Every series from the start, at 0, so that rate() and alerts see a refusal reason's first one.
requests.inc({ outcome: 'accepted', reason: '' }, 0);
requests.inc({ outcome: 'duplicate', reason: '' }, 0);
for (const reason of REFUSAL_REASONS) requests.inc({ outcome: 'refused', reason }, 0);

// Gauges read at scrape time.
new Gauge({
  name: 'payhook_receiver_events',
  help: 'Events this instance holds, by state; "queued" is the depth of the work queue.',
  labelNames: ['state'],
  registers: [register],
  collect() {
    const stats = receiver.stats();
    for (const state of ['claiming', 'accepted', 'queued', 'running']) this.set({ state }, stats[state]);
  },
});
new Gauge({
  name: 'payhook_receiver_held_bytes',
  help: 'Body bytes of the events held (bounded by maxQueuedBytes).',
  registers: [register],
  collect() {
    this.set(receiver.stats().heldBytes);
  },
});

const app = express();
app.use('/webhooks', payhook(receiver));
// Served beside the webhook here; in production, often on a port of its own that only the
// collector reaches.
app.get('/metrics', async (_req, res) => {
  res.set('content-type', register.contentType);
  res.end(await register.metrics());
});

const server = app.listen(port(), () =>
  console.log(`express receiver on http://127.0.0.1:${port()}/webhooks, metrics on /metrics`),
);
const stop = async () => {
  server.close();
  await receiver.close();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
