import { CliError, type Command, EXIT, type Io, parse, printJson } from '../command.js';
import { commandLine } from '../invocation.js';
import { SenderApi, SenderRefusedError } from '../sender-api.js';
import { senderOf, senderOptions } from '../sender-flags.js';
import { DEFAULT_SENDER_URL } from '../urls.js';
import { type EndpointSecret, endpointsResource } from '../webhook-endpoints.js';
import { refusal } from './endpoints.js';

/** The sender's longest overlap: 7 days. */
const MAX_OVERLAP_SECONDS = 7 * 24 * 60 * 60;

export const rotate: Command = {
  name: 'rotate',
  summary: "Rotate the business's signing secret, or an endpoint's, on a running sender",
  help: `Usage: payhook rotate [<url|id>] [--overlap <time>] [--base-url <url>] [--api-key <key>] [--json]

Rotates a signing secret on a running sender: a new one becomes current, and the previous one is
still signed with (every attempt carries both signatures) and accepted for the overlap, so that
receivers can be given the new one without refusing an event. Without <url|id>: the business's
secret (whsec_..., in the key's mode), the one \`payhook serve\` prints, which signs the endpoints
added with the default scheme. With the URL or id of an endpoint that has its own: its secret
(v1), or for a v1a endpoint its Ed25519 key pair, whose new public key (whpk_...) is printed.
The new secret or public key is printed once: add it to the receiver's signingSecrets (v1) or
signingPublicKeys (v1a) beside the previous one, and remove the previous one once the overlap
has ended.

Options:
  --overlap <time>      how long the previous secret stays valid: seconds, or 30m, 12h, 3d;
                        0 ends it now (for a secret that leaked), at most 7d    default: 24h
  --base-url <url>      the sender                               default: ${DEFAULT_SENDER_URL}
  --api-key <key>       the business's API key (default: PAYHOOK_API_KEY)              required
  --json                print the sender's answer: {"rotated": "business"|<endpoint id>, "secrets": [...]}
  -h, --help            show this help

Exit codes: 0 rotated; 1 the sender refused (the key, or an endpoint signed with the business's
secrets: rotate those without <url|id>) or no endpoint has that URL or id; 2 bad usage; 3 the
sender cannot be reached.

Examples:
  payhook rotate --api-key sk_test_...
  payhook rotate --overlap 0
  payhook rotate https://shop.example/hooks --overlap 3d`,
  async run(argv, io) {
    const { values, positionals } = parse(
      'rotate',
      argv,
      {
        overlap: { type: 'string' },
        ...senderOptions,
        json: { type: 'boolean' },
      },
      1,
    );
    const overlap = values.overlap === undefined ? undefined : overlapOf(values.overlap);
    const { baseUrl, apiKey } = senderOf(
      values,
      io.env,
      `: the key of the business whose secret this is (\`${commandLine('serve', io.env)}\` prints a test key on its first start).`,
    );
    const api = new SenderApi({ baseUrl, apiKey });
    const target = positionals[0];
    try {
      if (target === undefined) {
        const { data } = await api.post<{ data: EndpointSecret[] }>(
          '/accounts/signing-secrets/rotate',
          overlap === undefined ? {} : { overlap_seconds: overlap },
        );
        return report(io, values.json === true, 'business', "the business's signing secret", data ?? []);
      }
      const resource = endpointsResource(api);
      const { endpoint } = await resource.find(target);
      if (!endpoint) {
        throw new CliError(
          `No endpoint has the URL or id ${target}: nothing rotated. See: ${commandLine('endpoints list', io.env)}`,
          EXIT.failed,
        );
      }
      const secrets = await resource.rotate(endpoint, overlap);
      return report(io, values.json === true, endpoint.id, `the secret of ${endpoint.url}`, secrets);
    } catch (error) {
      if (error instanceof SenderRefusedError && error.code === 'invalid_state') {
        throw new CliError(
          `${error.message.replace(/\.$/, '')}. Its events are signed with the business's secret: rotate it with \`${commandLine('rotate', io.env)}\`.`,
          EXIT.failed,
        );
      }
      throw refusal(error, baseUrl, io);
    }
  },
};

/** `--overlap`: whole seconds, or `30m`, `12h`, `3d`; at most the sender's 7 days. */
export function overlapOf(value: string): number {
  const match = /^(\d+)([smhd]?)$/.exec(value.trim());
  const seconds = match
    ? Number(match[1]) * { '': 1, s: 1, m: 60, h: 3600, d: 86_400 }[match[2] as '' | 's' | 'm' | 'h' | 'd']
    : Number.NaN;
  if (!Number.isSafeInteger(seconds) || seconds > MAX_OVERLAP_SECONDS) {
    throw new CliError(
      `--overlap must be seconds or a time (30m, 12h, 3d), at most 7d, not ${JSON.stringify(value)}.`,
    );
  }
  return seconds;
}

/** Prints the new secret (or public key) once, and until when the previous one is valid. */
function report(io: Io, json: boolean, rotated: string, what: string, secrets: EndpointSecret[]): number {
  if (json) {
    printJson(io, { rotated, secrets });
    return EXIT.ok;
  }
  const current = secrets.find((s) => s.current);
  const previous = secrets.filter((s) => !s.current && s.expires_at);
  const until = previous
    .map((s) => s.expires_at as string)
    .sort()
    .at(-1);
  const say = (line: string) => io.stdout.write(`${line}\n`);
  if (current?.public_key) {
    say(`Rotated ${what} (Ed25519, v1a). Its new public key, for the receiver's signingPublicKeys:`);
    say(current.public_key);
  } else {
    say(`Rotated ${what}. The new secret, for the receiver's signingSecrets:`);
    say(current?.secret ?? '(the sender did not show it)');
  }
  say(
    until
      ? `Add it beside the previous one: events are signed with both until ${until}, then with the new one only.`
      : 'The previous one is no longer valid: events are signed with the new one only, so give it to the receiver now.',
  );
  return EXIT.ok;
}
