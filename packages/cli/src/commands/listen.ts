import { isKnownEventName, KNOWN_EVENTS } from '@payhook/core';
import { CliError, type Command, closest, parse } from '../command.js';
import { runListener } from '../listen/session.js';
import { DEFAULT_SENDER_URL, receiverUrl } from '../urls.js';

/** The sender's own time-out for a receiver's answer. */
const DEFAULT_TIMEOUT_MS = 15_000;

export const listen: Command = {
  name: 'listen',
  summary: "Receive a sender's events on this machine and forward them to a local URL",
  help: `Usage: payhook listen --api-key <sk_test_...> [--base-url <url>] [--forward-to <url>]
                      [--events <type,...>] [--print-json] [--skip-verify] [--live] [--timeout <ms>]

Opens a stream from the sender (GET /listen) and, for every new event of the key's business,
prints it and POSTs the exact body and signed headers to --forward-to, as a delivery would:
your receiver on localhost gets real events from a sender it could not be reached by. What
your receiver answers is reported back to the sender, whose attempt log (GET /events/{id})
shows it as a delivery to cli:<listener id>. A dropped connection is retried with backoff and
resumes after the last event received (within 5 minutes), without loss or duplicates. Several
listeners may run at once: each gets every event.

  --> payment.session.succeeded [<event id>]
  <-- [200] POST http://localhost:3000/webhooks [12 ms]

Options:
  --api-key <key>       the business's API key (default: PAYHOOK_API_KEY)          required
  --base-url <url>      the sender                               default: ${DEFAULT_SENDER_URL}
  --forward-to <url>    your local receiver; without it events are only printed (no scheme:
                        http://; a bare port, 3000 or :3000/webhooks: http://localhost)
  --events <types>      only these event types, comma-separated: ${KNOWN_EVENTS.join(', ')}
  --print-json          print each event's body too
  --skip-verify         do not verify the TLS certificate of an https --forward-to URL
  --live                listen with a live key (real payments); test keys only otherwise
  --timeout <ms>        how long your receiver has to answer                   default: 15000
  --concurrency <n>     events forwarded at once                                  default: 16
  -h, --help            show this help

Exit codes: 0 stopped with Ctrl-C; 1 the sender refuses the key (or the stream); 2 bad usage;
3 the sender cannot be reached at the start. Refusals by your receiver do not stop the listener.

Examples:
  payhook listen --api-key sk_test_... --forward-to http://localhost:3000/webhooks
  payhook listen --api-key sk_test_... --forward-to localhost:3000/webhooks
  payhook listen --api-key sk_test_... --base-url https://sandbox.example --events payment.session.succeeded --print-json
  # and in another terminal:
  payhook trigger payment.session.succeeded --base-url https://sandbox.example --api-key sk_test_...`,
  async run(argv, io) {
    const { values } = parse('listen', argv, {
      'api-key': { type: 'string' },
      'base-url': { type: 'string' },
      'forward-to': { type: 'string' },
      events: { type: 'string' },
      'print-json': { type: 'boolean' },
      'skip-verify': { type: 'boolean' },
      live: { type: 'boolean' },
      timeout: { type: 'string' },
      concurrency: { type: 'string' },
    });
    const apiKey = values['api-key'] ?? io.env.PAYHOOK_API_KEY;
    if (!apiKey)
      throw new CliError(
        '--api-key (or PAYHOOK_API_KEY) is required: the key of the business to listen for.',
      );
    if (!/^sk_(test|live)_\S+$/.test(apiKey)) {
      throw new CliError('--api-key must be an API key: sk_test_... (or sk_live_... with --live).');
    }
    const live = values.live === true;
    if (apiKey.startsWith('sk_live_') && !live) {
      throw new CliError(
        'This is a live key: live events are real payments. Add --live to listen to them on purpose.',
      );
    }
    if (apiKey.startsWith('sk_test_') && live) throw new CliError('--live takes a live key (sk_live_...).');
    const baseUrl = httpUrl(values['base-url'] ?? DEFAULT_SENDER_URL, '--base-url');
    let forwardTo: string | undefined;
    if (values['forward-to'] !== undefined) {
      const target = receiverUrl(values['forward-to']);
      if (!target) {
        throw new CliError(
          `--forward-to must be an http(s) URL (such as http://localhost:3000/webhooks), not ${JSON.stringify(values['forward-to'])}.`,
        );
      }
      forwardTo = target.href;
      // What was typed was completed: the URL used is said before anything is sent to it.
      if (target.completed)
        io.stdout.write(`Forwarding to ${forwardTo} (--forward-to ${values['forward-to']})
`);
    }
    const events = values.events
      ?.split(',')
      .map((e) => e.trim())
      .filter(Boolean);
    for (const event of events ?? []) {
      if (!isKnownEventName(event)) {
        const suggestion = closest(event, KNOWN_EVENTS);
        throw new CliError(
          `--events: unknown event ${JSON.stringify(event)}.${suggestion ? ` Did you mean ${suggestion}?` : ''} The sender sends ${KNOWN_EVENTS.join(', ')}.`,
        );
      }
    }
    return runListener(
      {
        baseUrl,
        apiKey,
        forwardTo,
        events,
        live,
        printJson: values['print-json'] === true,
        skipVerify: values['skip-verify'] === true,
        timeoutMs: positive(values.timeout, '--timeout', DEFAULT_TIMEOUT_MS),
        concurrency: positive(values.concurrency, '--concurrency', 16),
      },
      io,
    );
  },
};

function httpUrl(value: string, flag: string): string {
  try {
    const url = new URL(value);
    if (url.protocol === 'http:' || url.protocol === 'https:') return url.href;
  } catch {}
  throw new CliError(`${flag} must be an http(s) URL, not ${JSON.stringify(value)}.`);
}

function positive(value: string | undefined, flag: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1)
    throw new CliError(`${flag} must be a positive whole number, not ${JSON.stringify(value)}.`);
  return n;
}
