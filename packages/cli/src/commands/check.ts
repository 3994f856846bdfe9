import { checkCases } from '../check/cases.js';
import { runCases, UnreachableError } from '../check/run.js';
import {
  CliError,
  type Command,
  EXIT,
  painter,
  parse,
  printJson,
  required,
  signingKeys,
} from '../command.js';

/** The sender's time-out for a receiver's answer. */
const SENDER_TIMEOUT_MS = 15_000;

export const check: Command = {
  name: 'check',
  summary: 'Test any receiver (PHP, Python, Go, ...) against what the sender requires of it',
  help: `Usage: payhook check <url> --business-id <id> [--secret <whsec_...> ...] [--timeout <ms>] [--json]

Sends signed test events to your webhook URL, one after another, and reports for each what a
correct receiver must answer and what yours did: whatever language it is written in.

  valid event                    200
  duplicate delivery             200 (a retry is acknowledged, not 409)
  forged checksum                4xx
  checksum of another business   4xx
  tampered field                 4xx
  other key order, spaces, \\/    200 (verify the canonical JSON, not the bytes)
  unknown event type             200 (acknowledge what you do not know)
  malformed JSON                 4xx (never 5xx)
  with --secret, also:
  stale signature (10 min)       4xx
  signature with another secret  4xx
  missing signature              4xx

A refusal must be a 4xx: a 5xx makes the sender retry for 48 hours, a 2xx accepts a forgery.
Only 200 counts as delivered. Any answer slower than --timeout (the sender's 15 s) fails. A
failed case names the receiver's error code when its answer is JSON {"error":{"code":...}}, as
payhook's receivers answer (got 401 signature_required); --json gives it for every case (code).
With --secret every request but the signature cases carries a valid signature, forgeries
included, so that only the checksum can refuse those. The events are test payments: point it
at a test or staging receiver (valid events are handled).

Options:
  --business-id <id>    the business id your receiver verifies checksums with       required
  --secret <whsec_...>  your receiver's signing secret (repeat for several)
  --timeout <ms>        how long an answer may take                                 default: 15000
  --json                print {"url","passed","cases":[...]} as JSON
  -h, --help            show this help

Exit codes: 0 every case passes; 1 a case fails; 2 bad usage; 3 the URL cannot be reached.

Examples:
  payhook check http://localhost:8000/webhooks --business-id biz_123
  payhook check https://staging.merchant.example/webhooks --business-id biz_123 --secret whsec_... --json`,
  async run(argv, io) {
    const { values, positionals } = parse(
      'check',
      argv,
      {
        'business-id': { type: 'string' },
        secret: { type: 'string', multiple: true },
        timeout: { type: 'string' },
        json: { type: 'boolean' },
      },
      1,
    );
    const target = required(positionals[0], '<url> (your webhook URL)', 'check');
    try {
      const url = new URL(target);
      if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('not http');
    } catch {
      throw new CliError(`<url> must be an http(s) URL, not ${JSON.stringify(target)}.`);
    }
    const businessId = required(values['business-id'], '--business-id', 'check');
    const secrets = signingKeys(values.secret ?? []);
    let timeoutMs = SENDER_TIMEOUT_MS;
    if (values.timeout !== undefined) {
      timeoutMs = Number(values.timeout);
      if (!Number.isInteger(timeoutMs) || timeoutMs < 1) {
        throw new CliError(
          `--timeout must be a positive whole number of milliseconds, not ${JSON.stringify(values.timeout)}.`,
        );
      }
    }
    let results: Awaited<ReturnType<typeof runCases>>;
    try {
      results = await runCases(target, checkCases({ businessId, secrets }), timeoutMs);
    } catch (error) {
      if (error instanceof UnreachableError) {
        throw new CliError(`${error.message}. Is the receiver running, and is the URL right?`, EXIT.error);
      }
      throw error;
    }
    const passed = results.every((r) => r.ok);
    if (values.json) {
      printJson(io, { url: target, passed, cases: results });
    } else {
      const paint = painter(io);
      const width = Math.max(...results.map((r) => r.name.length));
      for (const r of results) {
        const verdict = r.ok ? paint.green('PASS') : paint.red('FAIL');
        // A failed case names the receiver's error code: what it refused the request for.
        const got = r.status === null ? 'no answer' : `got ${r.status}${!r.ok && r.code ? ` ${r.code}` : ''}`;
        const expected = r.expected === '200' ? 'expected 200' : 'expected a 4xx refusal';
        io.stdout.write(
          `${verdict}  ${r.name.padEnd(width)}  ${expected}, ${got} (${r.latencyMs} ms)${r.ok ? '' : `: ${r.detail}`}\n`,
        );
      }
      const count = results.filter((r) => r.ok).length;
      io.stdout.write(`${count} of ${results.length} cases pass.\n`);
    }
    return passed ? EXIT.ok : EXIT.failed;
  },
};
