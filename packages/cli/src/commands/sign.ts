import { randomUUID } from 'node:crypto';
import { encodeSignedEvent, signWebhook } from '@payhook/core';
import {
  CliError,
  type Command,
  EXIT,
  parse,
  printJson,
  readStdin,
  required,
  signingKeys,
} from '../command.js';
import { formatHttpMessage } from '../http-message.js';
import { commandLine } from '../invocation.js';

export const sign: Command = {
  name: 'sign',
  summary: 'Sign event data from standard input; print the payload (and headers) the service would send',
  help: `Usage: payhook sign --business-id <id> [--event <name>] [--secret <whsec_...> ...] [--id <event id>] [--timestamp <s>] [--json]

Reads the event's data (a JSON value) on standard input and prints the signed payload,
{"event","data","checksum"}, with data in canonical (RFC 8785) form: the exact bytes the
service sends, keyed by the receiving business's id.

With --secret it signs those bytes the Standard Webhooks way too and prints the three headers
the service sends (webhook-id, webhook-timestamp, webhook-signature with one v1 signature per
secret), an empty line, then the body: the form \`payhook verify\` reads.

Options:
  --business-id <id>   the receiving business's id (the checksum's key)      required
  --event <name>       the event name               default: payment.session.succeeded
  --secret <whsec_..>  a signing secret (repeat for several, as during a rotation)
  --id <event id>      the webhook-id                         default: a random UUID
  --timestamp <s>      the webhook-timestamp, in seconds since the epoch  default: now
  --json               print {"headers","body"} as JSON
  -h, --help           show this help

Examples:
  echo '{"id":"pay_1","amount":150000}' | payhook sign --business-id biz_123
  payhook sign --business-id biz_123 --event payment.session.failed < payment.json | payhook verify --business-id biz_123
  payhook sign --business-id biz_123 --secret whsec_... < payment.json | payhook verify --business-id biz_123 --secret whsec_...`,
  async run(argv, io) {
    const { values } = parse('sign', argv, {
      'business-id': { type: 'string' },
      event: { type: 'string' },
      secret: { type: 'string', multiple: true },
      id: { type: 'string' },
      timestamp: { type: 'string' },
      json: { type: 'boolean' },
    });
    const businessId = required(values['business-id'], '--business-id', 'sign');
    const event = values.event ?? 'payment.session.succeeded';
    const keys = signingKeys(values.secret ?? []);
    if (keys.length === 0 && (values.id !== undefined || values.timestamp !== undefined)) {
      throw new CliError(
        `--id and --timestamp go with --secret (they are signed headers). See: ${commandLine('sign --help', io.env)}`,
      );
    }
    if (values.id === '') throw new CliError('--id must not be empty.');
    const timestamp = values.timestamp === undefined ? undefined : Number(values.timestamp);
    if (timestamp !== undefined && !(Number.isSafeInteger(timestamp) && timestamp >= 0)) {
      throw new CliError(
        `--timestamp must be whole seconds since the epoch, not ${JSON.stringify(values.timestamp)}.`,
      );
    }
    const text = await readStdin(io, 'sign', "the event's data (JSON)");
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch (error) {
      throw new CliError(`Standard input is not JSON: ${(error as Error).message}`, EXIT.failed);
    }
    const body = encodeSignedEvent(event, data, businessId);
    const headers =
      keys.length === 0
        ? {}
        : signWebhook({
            id: values.id ?? randomUUID(),
            body,
            secrets: keys,
            ...(timestamp === undefined ? {} : { timestamp }),
          });
    if (values.json) printJson(io, { headers, body });
    else io.stdout.write(`${formatHttpMessage(headers, body)}\n`);
    return EXIT.ok;
  },
};
