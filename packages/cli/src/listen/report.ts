import type { ListenerAttemptsReport } from '@payhook/sender';
import type { ForwardOutcome } from './forward.js';

/** One attempt as `POST /listen/attempts` takes it. */
type AttemptReport = ListenerAttemptsReport['attempts'][number];

/** Reports sent at most this many at once (the route takes up to 1,000). */
const BATCH = 500;
/** How long a report waits for others to go with it. */
const LINGER_MS = 50;
/** Reports kept while the sender cannot take them; past this the oldest are dropped (and counted). */
const MAX_PENDING = 20_000;

/**
 * Sends what the listener did with each event back to the sender (`POST /listen/attempts`), in
 * batches, so the sender's attempt log shows it. A batch the sender does not take is sent again
 * with the next one; `flush` sends what is left.
 *
 * @example
 * ```ts
 * const reporter = createReporter({ baseUrl, apiKey, listenerId: () => id, onError });
 * reporter.add({ deliveryId, eventId, url }, outcome);
 * await reporter.flush();
 * ```
 */
export function createReporter(options: {
  baseUrl: string;
  apiKey: string;
  listenerId: () => string;
  /** Called when a batch could not be sent (it is kept and sent again). */
  onError: (message: string) => void;
}) {
  let pending: AttemptReport[] = [];
  let dropped = 0;
  let timer: NodeJS.Timeout | undefined;
  let sending: Promise<void> | undefined;
  let failures = 0;

  async function sendBatch(): Promise<void> {
    const batch = pending.slice(0, BATCH);
    if (batch.length === 0) return;
    try {
      const response = await fetch(new URL('/listen/attempts', options.baseUrl), {
        method: 'POST',
        headers: { authorization: `Bearer ${options.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ listener_id: options.listenerId(), attempts: batch }),
        signal: AbortSignal.timeout(15_000),
      });
      await response.text();
      if (response.status >= 500 || response.status === 429)
        throw new Error(`the sender answered ${response.status}`);
      // A 4xx is not going to change: that batch is not sent again.
      if (response.status >= 400)
        options.onError(`the sender refused ${batch.length} attempt report(s): ${response.status}`);
      pending = pending.slice(batch.length);
      failures = 0;
    } catch (error) {
      failures += 1;
      options.onError(`could not report attempts (${(error as Error).message}); kept, sent again`);
      await new Promise((resolve) => setTimeout(resolve, Math.min(30_000, 500 * 2 ** Math.min(failures, 6))));
    }
  }

  function schedule(): void {
    if (timer || sending) return;
    timer = setTimeout(run, pending.length >= BATCH ? 0 : LINGER_MS);
  }

  function run(): void {
    timer = undefined;
    sending = (async () => {
      while (pending.length > 0) {
        await sendBatch();
        if (pending.length < BATCH) break;
      }
    })().finally(() => {
      sending = undefined;
      if (pending.length > 0) schedule();
    });
  }

  return {
    /** Queues the report of one forwarded event. */
    add(delivery: { deliveryId: string; eventId: string; url: string }, outcome: ForwardOutcome): void {
      pending.push({
        delivery_id: delivery.deliveryId,
        event_id: delivery.eventId,
        url: delivery.url,
        started_at: outcome.startedAt.toISOString(),
        latency_ms: Math.max(0, Math.round(outcome.latencyMs)),
        status_code: outcome.statusCode,
        response_body: outcome.responseBody,
        error: outcome.error && {
          code: outcome.error.code.slice(0, 100),
          message: outcome.error.message.slice(0, 1000),
        },
      });
      if (pending.length > MAX_PENDING) {
        dropped += pending.length - MAX_PENDING;
        pending = pending.slice(-MAX_PENDING);
      }
      schedule();
    },
    /** Reports dropped because the sender could not take them for too long. */
    get dropped(): number {
      return dropped;
    },
    /** Sends every queued report; gives up after `timeoutMs` (returns how many are left). */
    async flush(timeoutMs = 5000): Promise<number> {
      const deadline = Date.now() + timeoutMs;
      if (timer) {
        clearTimeout(timer);
        timer = undefined;
      }
      while ((pending.length > 0 || sending) && Date.now() < deadline) {
        if (timer) {
          clearTimeout(timer);
          timer = undefined;
        }
        if (sending) await sending;
        else await sendBatch();
      }
      return pending.length;
    },
  };
}
