import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { isKnownEventName, KNOWN_EVENTS, signWebhook, type WebhookSignatureHeaders } from '@payhook/core';
import { createTestPayment, signEvent, type TestPaymentMethod } from '@payhook/core/testing';
import {
  CliError,
  type Command,
  closest,
  EXIT,
  oneOf,
  parse,
  printJson,
  required,
  signingKeys,
} from '../command.js';
import { senderOptions } from '../sender-flags.js';
import { DEFAULT_SENDER_URL } from '../urls.js';
import { RECEIVER_FLAGS, triggerRemote } from './trigger-remote.js';

const METHODS = ['card', 'bank_account', 'etransfer', 'wallet', 'crypto_address', 'none'] as const;
const STATUS: Record<string, 'pending' | 'settled' | 'failed'> = {
  'payment.session.created': 'pending',
  'payment.session.succeeded': 'settled',
  'payment.session.failed': 'failed',
};

export const trigger: Command = {
  name: 'trigger',
  summary: 'Send one signed event to a receiver, or make one happen on a sender',
  help: `Usage: payhook trigger <event> --to <url> --business-id <id> [--secret <whsec_...> ...] [--data <file.json>] [--method <type>] [--allow-unknown-event] [--json]
       payhook trigger <event> --api-key <sk_test_...> [--base-url <sender>] [--method <type>] [--json]

Events: ${KNOWN_EVENTS.join(', ')}

Two modes; the flags of one are a usage error in the other.

To a receiver (--to): signs one event the way the service does and POSTs it to a receiver, then
prints the status and body it answered. Without --data the event carries a realistic payment in
the state the event reports (created: pending, succeeded: settled, failed: failed). With --secret
the request carries the Standard Webhooks headers too (webhook-id, webhook-timestamp and
webhook-signature), as the service sends them. Exits 0 when the receiver answers 200, 1 for any
other status, 3 when it cannot be reached.

On a sender (--api-key or --base-url, or PAYHOOK_API_KEY set and no --to, --business-id,
--secret or --data): makes the event happen on a running sender (by default the one
\`payhook serve\` runs on this machine, ${DEFAULT_SENDER_URL}; or a shared sandbox) through its
API, with a test key, as \`stripe trigger\` does: it creates a payment session
(payment.session.created); for the outcomes it also captures it and completes it
through the sandbox (payment.session.succeeded or payment.session.failed), so those make the
created event too. It prints each call and every event the payment has, oldest first. The
sender signs the events and delivers them to the registered webhook URLs and to every
\`payhook listen\`: with \`payhook listen --forward-to http://localhost:3000/webhooks\` in
another terminal, this is the local loop. Only the events the sender makes can be made (no
--allow-unknown-event), and only with a test key (sk_test_...): the sandbox refuses live keys.
Exits 0 when the sender did it, 1 when it refused (its error code and message are shown), 3 when
it cannot be reached (or does not answer within 15 s).

Options (to a receiver):
  --to <url>            the receiver's webhook URL                                  required
  --business-id <id>    the receiving business's id (the checksum's key)            required
  --secret <whsec_...>  a signing secret (repeat for several, as during a rotation)
  --data <file.json>    the event's data, from a file (default: a fixture payment)
  --allow-unknown-event send an event name the service does not send (a receiver must
                        acknowledge events it does not know): otherwise a usage error
  --method <type>       the fixture's payment method: card, bank_account, etransfer, wallet,
                        crypto_address or none                          default: bank_account
  --json                print {"status","body","payload","headers"} as JSON

Options (on a sender):
  --api-key <key>       a test key of the business (default: PAYHOOK_API_KEY)      required
  --base-url <url>      the sender                               default: ${DEFAULT_SENDER_URL}
  --method <type>       the session's payment method: card, bank_account, etransfer, wallet
                        or crypto_address                               default: bank_account
  --json                print {"payment_id","events":[{"id","type"}],"calls":[{"method",
                        "path","status"}]} as JSON

  -h, --help            show this help

Exit codes: 0 done, 1 the receiver did not answer 200 or the sender refused, 2 bad usage,
3 the receiver or the sender cannot be reached.

Examples:
  payhook trigger payment.session.succeeded --to http://127.0.0.1:3000/webhooks/ --business-id biz_123
  payhook trigger payment.session.succeeded --to http://127.0.0.1:3000/webhooks/ --business-id biz_123 --secret whsec_...
  payhook trigger payment.session.failed --method card --to http://127.0.0.1:3000/webhooks/ --business-id biz_123 --json
  payhook trigger payment.refund.created --allow-unknown-event --data refund.json --to http://127.0.0.1:3000/webhooks/ --business-id biz_123
  payhook trigger payment.session.succeeded --api-key sk_test_...
  PAYHOOK_API_KEY=sk_test_... payhook trigger payment.session.failed --method card --base-url https://sandbox.example --json

The local loop, in two terminals:
  payhook listen --api-key sk_test_... --base-url https://sandbox.example --forward-to http://localhost:3000/webhooks
  payhook trigger payment.session.succeeded --base-url https://sandbox.example --api-key sk_test_...`,
  async run(argv, io) {
    const { values, positionals } = parse(
      'trigger',
      argv,
      {
        to: { type: 'string' },
        'business-id': { type: 'string' },
        secret: { type: 'string', multiple: true },
        data: { type: 'string' },
        method: { type: 'string' },
        'allow-unknown-event': { type: 'boolean' },
        json: { type: 'boolean' },
        ...senderOptions,
      },
      1,
    );
    const event = required(positionals[0], '<event> (such as payment.session.succeeded)', 'trigger');
    // On a sender when asked by a flag, or when PAYHOOK_API_KEY is set and no flag of the
    // receiver mode (--to, --business-id, --secret, --data) is given.
    const onSender =
      values['base-url'] !== undefined ||
      values['api-key'] !== undefined ||
      (Boolean(io.env.PAYHOOK_API_KEY) && RECEIVER_FLAGS.every((flag) => values[flag] === undefined));
    if (onSender) return triggerRemote(event, values, io);
    if (!isKnownEventName(event) && !values['allow-unknown-event']) {
      const suggestion = closest(event, KNOWN_EVENTS);
      throw new CliError(
        `Unknown event ${JSON.stringify(event)}.${suggestion ? ` Did you mean ${suggestion}?` : ''} ` +
          `The service sends ${KNOWN_EVENTS.join(', ')}; to send another name on purpose, add --allow-unknown-event.`,
      );
    }
    const to = required(values.to, '--to (or --api-key, to make the event on a sender)', 'trigger');
    const businessId = required(values['business-id'], '--business-id', 'trigger');
    const keys = signingKeys(values.secret ?? []);
    const method = oneOf(values.method, METHODS, '--method', 'bank_account') as TestPaymentMethod;
    let url: URL;
    try {
      url = new URL(to);
      if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('not http');
    } catch {
      throw new CliError(`--to must be an http(s) URL, not ${JSON.stringify(to)}.`);
    }
    let data: unknown;
    if (values.data !== undefined) {
      let text: string;
      try {
        text = await readFile(values.data, 'utf8');
      } catch (error) {
        throw new CliError(
          `Cannot read --data ${values.data}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}.`,
        );
      }
      try {
        data = JSON.parse(text);
      } catch (error) {
        throw new CliError(`--data ${values.data} is not JSON: ${(error as Error).message}`);
      }
    } else {
      data = createTestPayment({ method, ...(isKnownEventName(event) ? { status: STATUS[event] } : {}) });
    }
    const payload = signEvent(event, data, businessId);
    const body = JSON.stringify(payload);
    const signature: Partial<WebhookSignatureHeaders> =
      keys.length > 0 ? signWebhook({ id: randomUUID(), body, secrets: keys }) : {};
    let response: Response;
    try {
      response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...signature },
        body,
        redirect: 'manual',
        signal: AbortSignal.timeout(15_000),
      });
    } catch (error) {
      const reason = (error as Error & { cause?: { code?: string } }).cause?.code ?? (error as Error).message;
      throw new CliError(`Could not reach ${url.href}: ${reason}.`, EXIT.error);
    }
    const text = await response.text();
    let answer: unknown = text;
    try {
      answer = JSON.parse(text);
    } catch {}
    if (values.json) {
      printJson(io, { status: response.status, body: answer, payload, headers: signature });
    } else {
      const signed = keys.length > 0 ? ` (signed: webhook-id ${signature['webhook-id']})` : '';
      io.stdout.write(
        `${event} -> ${url.href}${signed}\n${response.status} ${response.statusText}\n${text}\n`,
      );
    }
    return response.status === 200 ? EXIT.ok : EXIT.failed;
  },
};
