import { isPayhookError } from '../errors.js';
import type { ParseEventResult } from '../events/parse-event.js';
import type { Job } from './handler-run.js';
import type { MetricHooks } from './metrics.js';
import type { Tracing } from './tracing.js';

/** One run of an event's handlers (`createHandlerRunner`'s attempt). */
type Run = (
  job: Job,
  n: number,
  parsed: ParseEventResult,
  transaction?: unknown,
) => Promise<void> | undefined;

/**
 * Wraps the runs of an event's handlers with what observes them: the duration and result of each
 * for the metrics hook, and a span around each, its handlers running in the span's context.
 * Without either, `run` itself: a receiver that observes nothing pays nothing per run.
 */
export function observeRuns(
  run: Run,
  hooks: MetricHooks,
  tracing: Tracing | undefined,
  attempts: number,
): Run {
  if (!hooks.handledObserved && tracing === undefined) return run;
  return (job, n, parsed, transaction) => {
    const event = job.payload.event;
    const started = hooks.handledObserved ? performance.now() : 0;
    const span = tracing?.start(event, job.key, n, job.trace);
    const finish = (failed: boolean, error?: unknown) => {
      if (hooks.handledObserved) {
        hooks.handled({
          event,
          attempt: n,
          durationMs: performance.now() - started,
          ok: !failed,
          code: !failed
            ? undefined
            : isPayhookError(error) && error.code === 'handler_timeout'
              ? 'handler_timeout'
              : 'handler_failed',
        });
      }
      // The loop in process-event runs every attempt until one passes, whatever else happens.
      span?.end(!failed ? 'processed' : n < attempts ? 'retrying' : 'dead_lettered', error);
    };
    let running: Promise<void> | undefined;
    try {
      running =
        span === undefined || tracing === undefined
          ? run(job, n, parsed, transaction)
          : tracing.within(span.context, () => run(job, n, parsed, transaction));
    } catch (error) {
      finish(true, error);
      throw error;
    }
    if (running === undefined) {
      finish(false);
      return undefined;
    }
    return running.then(
      () => finish(false),
      (error: unknown) => {
        finish(true, error);
        throw error;
      },
    );
  };
}
