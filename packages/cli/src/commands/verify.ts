import { explainChecksumMismatch, formatMismatch, verifyChecksum } from '@payhook/core';
import { CliError, type Command, EXIT, oneOf, parse, printJson, readStdin } from '../command.js';

export const verify: Command = {
  name: 'verify',
  summary: 'Verify a payload from standard input; explain a checksum mismatch',
  help: `Usage: payhook verify --business-id <id> [--business-id <id> ...] [--canonicalization auto|jcs|lexical] [--json]

Reads a webhook payload (the raw body as received) on standard input and checks its checksum
with each business id. Exits 0 if it verifies, 1 if not; on a mismatch it prints, for each
encoding tried and each id, the exact string hashed, its checksum, the checksum the payload
carries, and where the candidate strings differ.

Options:
  --business-id <id>          a business id to try as the key (repeat for several)    required
  --canonicalization <mode>   auto (lexical, then RFC 8785), jcs or lexical          default: auto
  --json                      print the result as JSON
  -h, --help                  show this help

Examples:
  payhook verify --business-id biz_123 < body.json
  payhook sign --business-id biz_123 < data.json | payhook verify --business-id biz_123 --json`,
  async run(argv, io) {
    const { values } = parse('verify', argv, {
      'business-id': { type: 'string', multiple: true },
      canonicalization: { type: 'string' },
      json: { type: 'boolean' },
    });
    const businessIds = (values['business-id'] ?? []).filter(Boolean);
    if (businessIds.length === 0) {
      throw new CliError('--business-id is required. See: payhook verify --help');
    }
    const canonicalization = oneOf(
      values.canonicalization,
      ['auto', 'jcs', 'lexical'] as const,
      '--canonicalization',
      'auto',
    );
    const rawBody = await readStdin(io);
    const result = verifyChecksum({ rawBody }, { businessIds, canonicalization });
    if (result.ok) {
      if (values.json) {
        printJson(io, {
          ok: true,
          event: result.event,
          businessId: result.businessId,
          canonicalization: result.canonicalization,
        });
      } else {
        io.stdout.write(
          `valid: ${result.event}, signed with business id ${result.businessId} (${result.canonicalization})\n`,
        );
      }
      return EXIT.ok;
    }
    const explanation = explainChecksumMismatch({ rawBody }, { businessIds, canonicalization });
    if (values.json) {
      printJson(io, {
        ok: false,
        error: { code: result.error.code, message: result.error.message },
        explanation,
      });
    } else {
      io.stdout.write(
        `invalid: ${result.error.code}: ${result.error.message}\n\n${formatMismatch(explanation)}\n`,
      );
    }
    return EXIT.failed;
  },
};
