import { EXIT, type Io, painter } from '../command.js';
import { commandLine } from '../invocation.js';
import { createForwarder } from './forward.js';
import { createReporter } from './report.js';
import { readServerSentEvents } from './sse.js';

/** What `payhook listen` was asked to do. */
export interface ListenOptions {
  baseUrl: string;
  apiKey: string;
  /** The local URL events are forwarded to; without it they are only printed. */
  forwardTo?: string;
  events?: readonly string[];
  live: boolean;
  printJson: boolean;
  skipVerify: boolean;
  /** How long the local receiver has to answer (the sender's own time-out by default). */
  timeoutMs: number;
  /** Events forwarded at once. */
  concurrency: number;
}

/** A `webhook` message of the stream. */
interface StreamedDelivery {
  delivery_id: string;
  event_id: string;
  type: string;
  headers: Record<string, string>;
  body: string;
}

/** A stream with nothing on it (not even its keep-alive comment) for this long is dead. */
const SILENCE_MS = 45_000;
const FIRST_BACKOFF_MS = 1000;
const MAX_BACKOFF_MS = 30_000;

/** Waits `ms`, or less when `signal` aborts. */
const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    });
  });

const reasonOf = (error: unknown) =>
  (error as { cause?: { code?: string; message?: string } }).cause?.code ??
  (error as { cause?: { message?: string } }).cause?.message ??
  (error as Error).message;

/**
 * Runs a listener until SIGINT or SIGTERM: connects to the sender's `GET /listen`, prints each
 * event, forwards it to the local URL, reports what came back, and reconnects (resuming after the
 * last event received) when the connection drops. Resolves to the exit code: 0 when stopped, 1
 * when the sender refuses the key or the stream (as every command exits when a sender refuses),
 * 3 when the sender cannot be reached at the start.
 */
export async function runListener(options: ListenOptions, io: Io): Promise<number> {
  const paint = painter(io);
  const out = (line: string) => io.stdout.write(`${line}\n`);
  const err = (line: string) => io.stderr.write(`${line}\n`);
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  let listenerId = '';
  let lastEventId: string | undefined;
  let connected = false;
  let backoff = FIRST_BACKOFF_MS;
  const counts = { received: 0, forwarded: 0, refused: 0 };
  const forwarder = options.forwardTo
    ? createForwarder(options.forwardTo, { timeoutMs: options.timeoutMs, skipVerify: options.skipVerify })
    : undefined;
  const reporter = forwarder
    ? createReporter({
        baseUrl: options.baseUrl,
        apiKey: options.apiKey,
        listenerId: () => listenerId,
        onError: (message) => err(paint.yellow(`Attempt log: ${message}.`)),
      })
    : undefined;
  const inFlight = new Set<Promise<void>>();

  function forward(delivery: StreamedDelivery): void {
    if (!forwarder || !reporter) return;
    const task = forwarder.send(delivery.body, delivery.headers).then((outcome) => {
      const ms = `[${Math.round(outcome.latencyMs)} ms]`;
      if (outcome.statusCode !== null) {
        const ok = outcome.statusCode >= 200 && outcome.statusCode < 300;
        if (ok) counts.forwarded += 1;
        else counts.refused += 1;
        const status = (ok ? paint.green : paint.red)(`[${outcome.statusCode}]`);
        out(`<-- ${status} POST ${forwarder.url} ${ms} ${paint.dim(`[${delivery.event_id}]`)}`);
      } else {
        counts.refused += 1;
        const hint = outcome.error?.code === 'connection_refused' ? ': is your receiver running?' : '';
        out(`<-- ${paint.red('[ERR]')} POST ${forwarder.url} ${ms} ${outcome.error?.message}${hint}`);
      }
      reporter.add(
        { deliveryId: delivery.delivery_id, eventId: delivery.event_id, url: forwarder.url },
        outcome,
      );
    });
    inFlight.add(task);
    void task.finally(() => inFlight.delete(task));
  }

  /** One connection: resolves with why it ended, or an exit code when the listener must stop. */
  async function connect(): Promise<{ exit: number } | { lost: string }> {
    const url = new URL('/listen', options.baseUrl);
    if (options.events?.length) url.searchParams.set('events', options.events.join(','));
    if (listenerId) url.searchParams.set('listener_id', listenerId);
    if (lastEventId) url.searchParams.set('after', lastEventId);
    if (options.live) url.searchParams.set('live', 'true');
    const attempt = new AbortController();
    const abort = () => attempt.abort();
    stop.signal.addEventListener('abort', abort);
    let response: Response;
    try {
      response = await fetch(url, {
        headers: { authorization: `Bearer ${options.apiKey}`, accept: 'text/event-stream' },
        signal: attempt.signal,
      });
    } catch (error) {
      stop.signal.removeEventListener('abort', abort);
      if (!connected && !stop.signal.aborted) {
        err(
          `payhook listen: cannot reach the sender at ${options.baseUrl}: ${reasonOf(error)}. Is it running (${commandLine('serve', io.env)}), and is --base-url right?`,
        );
        return { exit: EXIT.error };
      }
      return { lost: `cannot reach the sender: ${reasonOf(error)}` };
    }
    if (response.status !== 200) {
      stop.signal.removeEventListener('abort', abort);
      const text = await response.text().catch(() => '');
      let answer: { error?: { code?: string; message?: string } } = {};
      try {
        answer = JSON.parse(text);
      } catch {}
      const detail = answer.error?.message ?? (text.slice(0, 200) || response.statusText);
      if (response.status === 401) {
        err(
          `payhook listen: the sender refused the API key (401 unauthorized). Check --api-key (or PAYHOOK_API_KEY): ${detail}`,
        );
        return { exit: EXIT.failed };
      }
      // Too many listeners right after a cut: the sender may not have seen the old connection
      // close yet, so a reconnect waits and tries again.
      if (response.status < 500 && !(connected && response.status === 429)) {
        err(
          `payhook listen: the sender refused to stream (${response.status} ${answer.error?.code ?? ''}): ${detail}`,
        );
        return { exit: EXIT.failed };
      }
      if (!connected) {
        err(`payhook listen: the sender at ${options.baseUrl} answered ${response.status}: ${detail}`);
        return { exit: EXIT.error };
      }
      return { lost: `the sender answered ${response.status}` };
    }

    let lastActivity = Date.now();
    const watchdog = setInterval(() => {
      if (Date.now() - lastActivity > SILENCE_MS) attempt.abort();
    }, 1000);
    try {
      for await (const message of readServerSentEvents(
        response.body as unknown as AsyncIterable<Uint8Array>,
        () => (lastActivity = Date.now()),
      )) {
        if (message.event === 'ready') {
          const ready = JSON.parse(message.data) as {
            listener_id: string;
            business_id: string;
            mode: string;
            resumed?: boolean;
            reason?: string;
            resume_window_seconds: number;
          };
          listenerId = ready.listener_id;
          backoff = FIRST_BACKOFF_MS;
          if (!connected) {
            const where = forwarder ? ` to ${forwarder.url}` : ' (printing only: add --forward-to <url>)';
            out(
              `${paint.bold('Ready!')} Forwarding events for business ${ready.business_id} (${ready.mode} mode)${where}`,
            );
            out(paint.dim(`Listener ${ready.listener_id} on ${options.baseUrl}. Ctrl-C stops.`));
          } else if (ready.resumed) {
            out(`Reconnected: sending what was missed since ${lastEventId}.`);
          } else if (ready.resumed === false) {
            const why =
              ready.reason === 'outside_window'
                ? `the last event received is more than ${ready.resume_window_seconds} s old`
                : 'the last event received is unknown to the sender';
            out(
              paint.yellow(
                `Reconnected, but could not resume (${why}): events made meanwhile are in GET /events.`,
              ),
            );
          } else out('Reconnected.');
          connected = true;
        } else if (message.event === 'webhook') {
          const delivery = JSON.parse(message.data) as StreamedDelivery;
          lastEventId = delivery.event_id;
          counts.received += 1;
          out(`--> ${delivery.type} [${delivery.event_id}]`);
          if (options.printJson) out(JSON.stringify(JSON.parse(delivery.body), null, 2));
          // At most `concurrency` forwards at once: the stream waits (the sender's socket with it).
          while (inFlight.size >= options.concurrency) await Promise.race(inFlight);
          forward(delivery);
        }
      }
      return { lost: 'the sender closed the stream' };
    } catch (error) {
      if (stop.signal.aborted) return { lost: 'stopped' };
      return {
        lost: attempt.signal.aborted ? `nothing received for ${SILENCE_MS / 1000} s` : reasonOf(error),
      };
    } finally {
      clearInterval(watchdog);
      stop.signal.removeEventListener('abort', abort);
    }
  }

  let code: number = EXIT.ok;
  try {
    while (!stop.signal.aborted) {
      const ended = await connect();
      if ('exit' in ended) {
        code = ended.exit;
        break;
      }
      if (stop.signal.aborted) break;
      err(
        paint.yellow(`Connection to the sender lost (${ended.lost}); reconnecting in ${backoff / 1000} s...`),
      );
      await sleep(backoff, stop.signal);
      backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
    }
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await Promise.allSettled([...inFlight]);
    const left = (await reporter?.flush()) ?? 0;
    await forwarder?.close();
    if (connected) {
      const lost = left + (reporter?.dropped ?? 0);
      out(
        `Stopped: ${counts.received} event(s) received${forwarder ? `, ${counts.forwarded} answered 2xx, ${counts.refused} refused or failed` : ''}.${lost > 0 ? ` ${lost} attempt report(s) could not reach the sender.` : ''}`,
      );
    }
  }
  return code;
}
