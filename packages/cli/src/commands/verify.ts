import {
  DEFAULT_SIGNATURE_TOLERANCE_SECONDS,
  explainChecksumMismatch,
  explainSignature,
  formatMismatch,
  formatSignatureExplanation,
  readSignatureHeaders,
  verifyChecksum,
  verifyWebhookSignature,
} from '@payhook/core';
import {
  CliError,
  type Command,
  EXIT,
  oneOf,
  parse,
  printJson,
  readStdin,
  signingKeys,
  signingPublicKeys,
} from '../command.js';
import { addHeader, parseHttpMessage } from '../http-message.js';
import { commandLine } from '../invocation.js';

export const verify: Command = {
  name: 'verify',
  summary: 'Verify a payload (and its signature headers) from standard input; explain a mismatch',
  help: `Usage: payhook verify [--business-id <id> ...] [--secret <whsec_...> ...] [--public-key <whpk_...> ...]
                      [--header "name: value" ...] [--tolerance <s>] [--canonicalization auto|jcs|lexical] [--json]

Reads a webhook request on standard input, the raw body as received, optionally preceded by
its header lines and an empty line (as \`payhook sign --secret\` prints it), and checks:
  - the checksum, with each --business-id as the key;
  - the Standard Webhooks signature (webhook-id, webhook-timestamp, webhook-signature, from
    standard input or --header), v1 with each --secret and v1a (Ed25519) with each --public-key,
    and its timestamp within --tolerance.
Exits 0 if every check asked for passes, 1 if not; on a mismatch it prints what was hashed or
signed, what each key gives, what the request carries, and where candidate strings differ.
A final newline after the body (which \`sign\` prints and editors add) is not part of it.

Options:
  --business-id <id>          a business id to try as the checksum's key (repeat for several)
  --secret <whsec_...>        a signing secret to try (repeat for several)
  --public-key <whpk_...>     an endpoint's v1a public key to try (repeat for several)
  --header, -H <line>         a request header, "name: value" (repeat; beside those on stdin)
  --tolerance <s>             the signature timestamp's largest distance from now    default: 300
  --canonicalization <mode>   auto (lexical, then RFC 8785), jcs or lexical          default: auto
  --json                      print the result as JSON
  -h, --help                  show this help
At least one --business-id, --secret or --public-key is required.

Examples:
  payhook verify --business-id biz_123 < body.json
  payhook sign --business-id biz_123 < data.json | payhook verify --business-id biz_123 --json
  payhook sign --business-id biz_123 --secret whsec_... < data.json | payhook verify --business-id biz_123 --secret whsec_...
  payhook verify --secret whsec_... -H "webhook-id: evt_1" -H "webhook-timestamp: 1767225600" -H "webhook-signature: v1,..." < body.json
  payhook verify --public-key whpk_... -H "webhook-id: evt_1" -H "webhook-timestamp: 1767225600" -H "webhook-signature: v1a,..." < body.json`,
  async run(argv, io) {
    const { values } = parse('verify', argv, {
      'business-id': { type: 'string', multiple: true },
      secret: { type: 'string', multiple: true },
      'public-key': { type: 'string', multiple: true },
      header: { type: 'string', multiple: true, short: 'H' },
      tolerance: { type: 'string' },
      canonicalization: { type: 'string' },
      json: { type: 'boolean' },
    });
    const businessIds = (values['business-id'] ?? []).filter(Boolean);
    const keys = signingKeys(values.secret ?? []);
    const publicKeys = signingPublicKeys(values['public-key'] ?? []);
    if (businessIds.length === 0 && keys.length === 0 && publicKeys.length === 0) {
      throw new CliError(
        `--business-id, --secret or --public-key is required. See: ${commandLine('verify --help', io.env)}`,
      );
    }
    const canonicalization = oneOf(
      values.canonicalization,
      ['auto', 'jcs', 'lexical'] as const,
      '--canonicalization',
      'auto',
    );
    const toleranceSeconds =
      values.tolerance === undefined ? DEFAULT_SIGNATURE_TOLERANCE_SECONDS : Number(values.tolerance);
    if (!(Number.isSafeInteger(toleranceSeconds) && toleranceSeconds >= 0)) {
      throw new CliError(`--tolerance must be whole seconds, not ${JSON.stringify(values.tolerance)}.`);
    }
    const message = parseHttpMessage(
      await readStdin(io, 'verify', 'the webhook body (after its header lines, if any)'),
    );
    for (const line of values.header ?? []) addHeader(message.headers, line);
    const rawBody = message.body.replace(/\r?\n$/, '');

    // JSON: the checksum's verdict at the top level (as before signatures), the signature's under `signature`.
    const report: Record<string, unknown> = {};
    const text: string[] = [];
    let ok = true;
    if (businessIds.length > 0) {
      const result = verifyChecksum({ rawBody }, { businessIds, canonicalization });
      if (result.ok) {
        const { event, businessId } = result;
        Object.assign(report, { event, businessId, canonicalization: result.canonicalization });
        text.push(`valid: ${event}, signed with business id ${businessId} (${result.canonicalization})`);
      } else {
        ok = false;
        const { code, message: reason } = result.error;
        const explanation = explainChecksumMismatch({ rawBody }, { businessIds, canonicalization });
        Object.assign(report, { error: { code, message: reason }, explanation });
        const empty = rawBody.trim() === '';
        text.push(
          `invalid: ${code}: ${empty ? `nothing was read from standard input (pipe the body in: ${commandLine('verify --business-id <id> < body.json', io.env)})` : reason}`,
        );
        // A payload that cannot be read has nothing to compare: its explanation would only repeat the error.
        if (explanation.candidates.length > 0) text.push('', formatMismatch(explanation));
      }
    }
    if (keys.length > 0 || publicKeys.length > 0) {
      const received = readSignatureHeaders(message.headers);
      const options = { secrets: keys, publicKeys, toleranceSeconds };
      const result = verifyWebhookSignature(received, rawBody, options);
      if (result.ok) {
        const { id, timestamp, scheme, secretIndex, publicKeyIndex } = result;
        report.signature = { ok: true, id, timestamp, scheme, secretIndex, publicKeyIndex };
        const by =
          scheme === 'v1a' ? `public key #${publicKeyIndex + 1} (v1a)` : `secret #${secretIndex + 1}`;
        text.push(`signature valid: webhook-id ${id}, timestamp ${timestamp}, ${by}`);
      } else {
        ok = false;
        const { code, message: reason } = result.error;
        const explanation = explainSignature(received, rawBody, options);
        report.signature = { ok: false, error: { code, message: reason }, explanation };
        text.push(`signature invalid: ${code}: ${reason}`, '', formatSignatureExplanation(explanation));
      }
    }
    if (values.json) printJson(io, { ok, ...report });
    else io.stdout.write(`${text.join('\n')}\n`);
    return ok ? EXIT.ok : EXIT.failed;
  },
};
