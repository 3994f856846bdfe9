import { CliError, type Command, closest, EXIT, type Io, parse, printJson, required } from '../command.js';
import { commandLine } from '../invocation.js';
import { QUICKSTART_RECEIVER_URL } from '../receiver-block.js';
import { SenderApi, SenderRefusedError, SenderUnreachableError } from '../sender-api.js';
import { senderOf, senderOptions } from '../sender-flags.js';
import { DEFAULT_SENDER_URL, receiverUrl } from '../urls.js';
import {
  type Endpoint,
  endpointsResource,
  UrlsRefusedError,
  type WebhookEndpoints,
} from '../webhook-endpoints.js';

const ACTIONS = ['add', 'list', 'remove', 'disable', 'enable', 'recover'] as const;
type Action = (typeof ACTIONS)[number];

export const endpoints: Command = {
  name: 'endpoints',
  summary: 'Add, list, remove, disable, enable and recover the webhook endpoints of a running sender',
  help: `Usage: payhook endpoints add <url> [--events <types>] [--scheme v1|v1a] [--description <text>]
       payhook endpoints list
       payhook endpoints remove <url|id>
       payhook endpoints disable <url|id>
       payhook endpoints enable <url|id>
       payhook endpoints recover <url|id> --since <time> [--until <time>]
  each with [--base-url <url>] [--api-key <key>] [--json]

The webhook endpoints of the API key's business (in the key's mode: test or live), on a running
sender, through its /webhook-endpoints API. add makes an endpoint (a URL that has one already is
left as it is) signed with the business's secrets, the ones \`payhook serve\` prints; with
--scheme v1a it gets its own Ed25519 key pair instead, and add prints the public key for the
receiver's signingPublicKeys. list shows each endpoint's id, status, signature scheme (v1 or
v1a), events, URL and description; remove deletes one, disable stops every attempt to it (its
pending deliveries are kept), enable turns it on again (the kept deliveries resume; the events
made while it was disabled are sent only if recovered), and recover sends it again every failed
or never-attempted delivery of the events made in a window (at most 14 days back), each with a
fresh 48 hours. An endpoint is named by its id or its URL. The sender checks a URL when it is
added: the service delivers to public addresses only, and
\`payhook serve --allow-private-webhooks\` lets a sandbox deliver to your own machine
(localhost). A URL without a scheme is taken as http:// (localhost:3000/webhooks), a bare port as
http://localhost (3000).

Options:
  --events <types>      add: the event types it takes, comma-separated      default: * (every event)
  --scheme v1|v1a       add: HMAC-SHA256 (v1) or Ed25519 (v1a) signatures    default: v1
  --description <text>  add: a note shown with it
  --since <time>        recover: events made at or after it: ISO 8601, or 30m, 12h, 3d ago   required
  --until <time>        recover: events made before it                       default: now
  --base-url <url>      the sender                               default: ${DEFAULT_SENDER_URL}
  --api-key <key>       the business's API key (default: PAYHOOK_API_KEY)              required
  --json                print the sender's answer: {"endpoints": [...], "webhook_urls": [...]}
                        (and what changed, or {"queued": n} for recover)
  -h, --help            show this help

Exit codes: 0 done (also adding a URL that has an endpoint already); 1 the sender refused (the
URL, the window or the key: its reason is shown) or no endpoint has that URL or id; 2 bad usage;
3 the sender cannot be reached.

Examples:
  payhook endpoints add http://localhost:3000/webhooks --api-key sk_test_...
  payhook endpoints add https://shop.example/hooks --events payment.session.succeeded --scheme v1a
  payhook endpoints list --base-url https://sandbox.example --json
  payhook endpoints disable http://localhost:3000/webhooks
  payhook endpoints recover http://localhost:3000/webhooks --since 2d`,
  async run(argv, io) {
    const [action, ...rest] = argv;
    if (!ACTIONS.includes(action as Action)) {
      const suggestion = action && closest(action, ACTIONS);
      throw new CliError(
        `${action ? `Unknown action ${JSON.stringify(action)}: use` : 'Give'} ${ACTIONS.slice(0, -1).join(', ')} or recover.${suggestion ? ` Did you mean ${suggestion}?` : ''} See: ${commandLine('endpoints --help', io.env)}`,
      );
    }
    const { values, positionals } = parse(
      'endpoints',
      rest,
      {
        ...senderOptions,
        json: { type: 'boolean' },
        ...(action === 'add'
          ? { events: { type: 'string' }, scheme: { type: 'string' }, description: { type: 'string' } }
          : {}),
        ...(action === 'recover' ? { since: { type: 'string' }, until: { type: 'string' } } : {}),
      } as const,
      action === 'list' ? 0 : 1,
    );
    const v = values as Record<string, string | boolean | undefined>;
    let target: string | undefined;
    if (action === 'add') {
      const typed = required(positionals[0], '<url>', 'endpoints');
      const parsed = receiverUrl(typed);
      if (!parsed) throw new CliError(`<url> must be an http(s) URL, not ${JSON.stringify(typed)}.`);
      target = parsed.href;
    } else if (action !== 'list') {
      target = required(positionals[0], '<url|id>', 'endpoints');
    }
    const scheme = v.scheme as string | undefined;
    if (scheme !== undefined && scheme !== 'v1' && scheme !== 'v1a') {
      throw new CliError(`--scheme must be v1 or v1a, not ${JSON.stringify(scheme)}.`);
    }
    const events =
      typeof v.events === 'string'
        ? v.events
            .split(',')
            .map((t) => t.trim())
            .filter(Boolean)
        : undefined;
    if (events !== undefined && events.length === 0)
      throw new CliError('--events needs at least one type (or *).');
    const now = new Date();
    const window =
      action === 'recover'
        ? {
            since: timeOf(required(v.since as string | undefined, '--since', 'endpoints'), '--since', now),
            ...(typeof v.until === 'string' ? { until: timeOf(v.until, '--until', now) } : {}),
          }
        : undefined;
    const { baseUrl, apiKey } = senderOf(
      values,
      io.env,
      `: the key of the business whose endpoints these are (\`${commandLine('serve', io.env)}\` prints a test key on its first start).`,
    );
    const resource = endpointsResource(new SenderApi({ baseUrl, apiKey }));
    const request: Request = {
      action: action as Action,
      target,
      json: v.json === true,
      options: {
        ...(events ? { events } : {}),
        ...(scheme ? { scheme: scheme as 'v1' | 'v1a' } : {}),
        ...(typeof v.description === 'string' ? { description: v.description } : {}),
      },
      window,
    };
    try {
      return await act(resource, request, io);
    } catch (error) {
      throw refusal(error, baseUrl, io);
    }
  },
};

/** `--since`/`--until`: ISO 8601 passed on as typed (the sender refuses what it cannot read), or `30m`, `12h`, `3d` ago. */
export function timeOf(value: string, flag: string, now: Date): string {
  const relative = /^(\d+)([mhd])$/.exec(value.trim());
  if (relative) {
    const unit = { m: 60_000, h: 3_600_000, d: 86_400_000 }[relative[2] as 'm' | 'h' | 'd'];
    return new Date(now.getTime() - Number(relative[1]) * unit).toISOString();
  }
  if (!/^\d{4}-\d{2}-\d{2}/.test(value)) {
    throw new CliError(
      `${flag} must be an ISO 8601 time (2026-01-31T12:00:00Z) or a time ago (30m, 12h, 3d), not ${JSON.stringify(value)}.`,
    );
  }
  return value;
}

interface Request {
  action: Action;
  target: string | undefined;
  json: boolean;
  options: { events?: string[]; scheme?: 'v1' | 'v1a'; description?: string };
  window: { since: string; until?: string } | undefined;
}

/** An endpoint's events in words: `*` or the types, comma-separated. */
const eventsOf = (e: Endpoint) => (e.enabled_events.includes('*') ? '*' : e.enabled_events.join(','));

/** Its status, with why it is disabled or how far it is in failing. */
function statusOf(e: Endpoint): string {
  if (e.status === 'disabled') return e.disabled_reason ? `disabled (${e.disabled_reason})` : 'disabled';
  return e.failure?.warning ? `enabled (failing ${e.failure.warning}%)` : 'enabled';
}

/**
 * The endpoints as aligned columns: id, status, signature scheme (v1 or v1a), events, URL and,
 * last, the description (a free text of any length), when any endpoint has one.
 */
function table(list: readonly Endpoint[]): string[] {
  const described = list.some((e) => e.description);
  const rows = [
    ['ID', 'STATUS', 'SCHEME', 'EVENTS', 'URL', ...(described ? ['DESCRIPTION'] : [])],
    ...list.map((e) => [
      e.id,
      statusOf(e),
      e.signature_scheme,
      eventsOf(e),
      e.url,
      ...(described ? [e.description ?? ''] : []),
    ]),
  ];
  const last = (rows[0] as string[]).length - 1;
  const widths = (rows[0] as string[]).map((_, i) => Math.max(...rows.map((r) => (r[i] as string).length)));
  return rows.map((r) =>
    `  ${r.map((cell, i) => (i < last ? cell.padEnd(widths[i] as number) : cell)).join('  ')}`.trimEnd(),
  );
}

/** What `--json` prints of the endpoints. */
const listed = (list: readonly Endpoint[]) => ({ endpoints: list, webhook_urls: list.map((e) => e.url) });

/** Does the action, prints what came of it, resolves to the exit code. */
async function act(resource: WebhookEndpoints, request: Request, io: Io): Promise<number> {
  const say = (line: string) => io.stdout.write(`${line}\n`);
  const show = (list: readonly Endpoint[]) => {
    if (list.length === 0) {
      say('No webhook endpoint now: events go to no URL (a `payhook listen` still gets them).');
      return;
    }
    say(
      list.length === 1
        ? 'The sender delivers to this endpoint:'
        : `The sender delivers to these ${list.length} endpoints:`,
    );
    for (const line of table(list)) say(line);
  };
  if (request.action === 'list') {
    const list = await resource.list();
    if (request.json) printJson(io, listed(list));
    else if (list.length === 0)
      say(`No webhook endpoint. Add one: ${commandLine(`endpoints add ${QUICKSTART_RECEIVER_URL}`, io.env)}`);
    else show(list);
    return EXIT.ok;
  }
  const target = request.target as string;
  if (request.action === 'add') {
    const { endpoints: list, endpoint, changed } = await resource.add(target, request.options);
    const keys = changed && endpoint.signature_scheme === 'v1a' ? await resource.secrets(endpoint) : [];
    const publicKey = keys.find((k) => k.current)?.public_key;
    if (request.json) {
      printJson(io, {
        url: target,
        changed,
        endpoint,
        ...(publicKey ? { public_key: publicKey } : {}),
        ...listed(list),
      });
    } else {
      say(changed ? `Added ${target}.` : `${target} has an endpoint already: nothing changed.`);
      if (publicKey) say(`Its receiver verifies with this public key (signingPublicKeys): ${publicKey}`);
      show(list);
    }
    return EXIT.ok;
  }
  const { endpoints: list, endpoint } = await resource.find(target);
  if (!endpoint) {
    if (request.json) printJson(io, { url: target, found: false, ...listed(list) });
    else {
      io.stderr.write(
        `No endpoint has the URL or id ${target}: nothing ${request.action === 'recover' ? 'recovered' : 'changed'}.${list.length > 0 ? `\n${table(list).join('\n')}` : ' There is no endpoint.'}\n`,
      );
    }
    return EXIT.failed;
  }
  if (request.action === 'remove') {
    const after = await resource.remove(endpoint);
    if (request.json) printJson(io, { url: endpoint.url, removed: endpoint.id, ...listed(after) });
    else {
      say(`Removed ${endpoint.url} (${endpoint.id}).`);
      show(after);
    }
    return EXIT.ok;
  }
  if (request.action === 'recover') {
    const recovered = await resource.recover(endpoint, request.window as { since: string; until?: string });
    if (request.json) printJson(io, { endpoint_id: endpoint.id, url: endpoint.url, ...recovered });
    else {
      say(
        `Queued ${recovered.queued} deliver${recovered.queued === 1 ? 'y' : 'ies'} to ${endpoint.url}, each with a fresh 48 hours: the failed and never-attempted ones of the events made from ${recovered.since} to ${recovered.until}.${endpoint.status === 'disabled' ? ' The endpoint is disabled: they go out once it is enabled.' : ''}`,
      );
    }
    return EXIT.ok;
  }
  const status = request.action === 'enable' ? 'enabled' : 'disabled';
  const after = await resource.setStatus(endpoint, status);
  if (request.json) printJson(io, { endpoint: after, changed: endpoint.status !== after.status });
  else if (endpoint.status === after.status && endpoint.disabled_reason === after.disabled_reason) {
    say(`${after.url} is ${after.status} already: nothing changed.`);
  } else if (status === 'enabled') {
    say(
      `Enabled ${after.url}: the deliveries held while it was disabled resume, each with a fresh 48 hours. The events made while it was disabled are not sent to it unless recovered: ${commandLine(`endpoints recover ${after.url} --since <when>`, io.env)} (<when>: when it was disabled, an ISO 8601 time or 30m, 12h, 3d ago; at most 14 days back).`,
    );
  } else {
    say(`Disabled ${after.url}: nothing is sent to it until it is enabled; its pending deliveries are kept.`);
  }
  return EXIT.ok;
}

/** The one-line error for what went wrong on the way to the sender, with its exit code. */
export function refusal(error: unknown, baseUrl: string, io: Io): unknown {
  if (error instanceof UrlsRefusedError) {
    const reasons = error.refusals.map((r) => `the sender refused ${r.url}: ${r.message}`);
    return new CliError(reasons.join(' '), EXIT.failed);
  }
  if (error instanceof SenderRefusedError) {
    const hint =
      error.call.status === 401
        ? ' Check --api-key (or PAYHOOK_API_KEY): the sender does not know this key.'
        : error.call.status === 404
          ? ` Is ${baseUrl} the address of a payhook sender (and its path, if any, the right one)?`
          : '';
    const fields = error.fields.map((f) => ` ${f.field}: ${f.message}.`).join('');
    return new CliError(`${error.message.replace(/\.$/, '')}.${fields}${hint}`, EXIT.failed);
  }
  if (error instanceof SenderUnreachableError) {
    return new CliError(
      `${error.message} Is it running? \`${commandLine('serve', io.env)}\` starts one.`,
      EXIT.error,
    );
  }
  return error;
}
