import { readFile } from 'node:fs/promises';
import { isKnownEventName } from '@payhook/core';
import { createTestPayment, signEvent, type TestPaymentMethod } from '@payhook/core/testing';
import { CliError, type Command, EXIT, oneOf, parse, printJson, required } from '../command.js';

const METHODS = ['card', 'bank_account', 'etransfer', 'wallet', 'crypto_address', 'none'] as const;
const STATUS: Record<string, 'pending' | 'settled' | 'failed'> = {
  'payment.session.created': 'pending',
  'payment.session.succeeded': 'settled',
  'payment.session.failed': 'failed',
};

export const trigger: Command = {
  name: 'trigger',
  summary: 'Send one signed event straight to a receiver and show its answer',
  help: `Usage: payhook trigger <event> --to <url> --business-id <id> [--data <file.json>] [--method <type>] [--json]

Signs one event the way the service does and POSTs it to a receiver, then prints the status
and body it answered. Without --data the event carries a realistic payment in the state the
event reports (created: pending, succeeded: settled, failed: failed). Exits 0 when the
receiver answers 200, 1 for any other status, 3 when it cannot be reached.

Options:
  --to <url>            the receiver's webhook URL                                  required
  --business-id <id>    the receiving business's id (the HMAC key)                  required
  --data <file.json>    the event's data, from a file (default: a fixture payment)
  --method <type>       the fixture's payment method: card, bank_account, etransfer, wallet,
                        crypto_address or none                          default: bank_account
  --json                print {"status","body","payload"} as JSON
  -h, --help            show this help

Examples:
  payhook trigger payment.session.succeeded --to http://127.0.0.1:3000/webhooks/ --business-id biz_123
  payhook trigger payment.session.failed --method card --to http://127.0.0.1:3000/webhooks/ --business-id biz_123 --json
  payhook trigger payment.refund.created --data refund.json --to http://127.0.0.1:3000/webhooks/ --business-id biz_123`,
  async run(argv, io) {
    const { values, positionals } = parse(
      'trigger',
      argv,
      {
        to: { type: 'string' },
        'business-id': { type: 'string' },
        data: { type: 'string' },
        method: { type: 'string' },
        json: { type: 'boolean' },
      },
      1,
    );
    const event = required(positionals[0], '<event> (such as payment.session.succeeded)', 'trigger');
    const to = required(values.to, '--to', 'trigger');
    const businessId = required(values['business-id'], '--business-id', 'trigger');
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
    let response: Response;
    try {
      response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(payload),
        redirect: 'manual',
        signal: AbortSignal.timeout(15_000),
      });
    } catch (error) {
      const reason = (error as Error & { cause?: { code?: string } }).cause?.code ?? (error as Error).message;
      throw new CliError(`Could not reach ${url.href}: ${reason}.`, EXIT.error);
    }
    const text = await response.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {}
    if (values.json) {
      printJson(io, { status: response.status, body, payload });
    } else {
      io.stdout.write(`${event} -> ${url.href}\n${response.status} ${response.statusText}\n${text}\n`);
    }
    return response.status === 200 ? EXIT.ok : EXIT.failed;
  },
};
