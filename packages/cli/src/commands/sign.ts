import { encodeSignedEvent } from '@payhook/core';
import { CliError, type Command, EXIT, parse, readStdin, required } from '../command.js';

export const sign: Command = {
  name: 'sign',
  summary: 'Sign event data from standard input; print the payload the service would send',
  help: `Usage: payhook sign --business-id <id> [--event <name>]

Reads the event's data (a JSON value) on standard input and prints the signed payload,
{"event","data","checksum"}, with data in canonical (RFC 8785) form: the exact bytes the
service sends, keyed by the receiving business's id.

Options:
  --business-id <id>   the receiving business's id (the HMAC key)          required
  --event <name>       the event name               default: payment.session.succeeded
  -h, --help           show this help

Examples:
  echo '{"id":"pay_1","amount":150000}' | payhook sign --business-id biz_123
  payhook sign --business-id biz_123 --event payment.session.failed < payment.json | payhook verify --business-id biz_123`,
  async run(argv, io) {
    const { values } = parse('sign', argv, {
      'business-id': { type: 'string' },
      event: { type: 'string' },
    });
    const businessId = required(values['business-id'], '--business-id', 'sign');
    const event = values.event ?? 'payment.session.succeeded';
    const text = await readStdin(io);
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch (error) {
      throw new CliError(`Standard input is not JSON: ${(error as Error).message}`, EXIT.failed);
    }
    io.stdout.write(`${encodeSignedEvent(event, data, businessId)}\n`);
    return EXIT.ok;
  },
};
