import { CliError, type Command, closest, EXIT, type Io, parse, printJson, required } from '../command.js';
import { SenderApi, SenderRefusedError, SenderUnreachableError } from '../sender-api.js';
import { DEFAULT_SENDER_URL, receiverUrl, senderUrl } from '../urls.js';
import { settingsEndpoints, UrlsRefusedError, type WebhookEndpoints } from '../webhook-endpoints.js';

const ACTIONS = ['add', 'list', 'remove'] as const;

export const endpoints: Command = {
  name: 'endpoints',
  summary: 'Register, list and remove the webhook URLs a running sender delivers events to',
  help: `Usage: payhook endpoints add <url> [--base-url <url>] [--api-key <key>] [--json]
       payhook endpoints list [--base-url <url>] [--api-key <key>] [--json]
       payhook endpoints remove <url> [--base-url <url>] [--api-key <key>] [--json]

The webhook URLs of the API key's business (in the key's mode: test or live), on a running
sender, through its API. add registers a URL (one already registered is left as it is), list
shows them, remove deletes one. The sender delivers every event to each registered URL. It
checks a URL when it is added: the service delivers to public addresses only, and \`payhook serve
--allow-private-webhooks\` lets a sandbox deliver to your own machine (localhost). A URL without a
scheme is taken as http:// (localhost:3000/webhooks), a bare port as http://localhost (3000).

Options:
  --base-url <url>   the sender                               default: ${DEFAULT_SENDER_URL}
  --api-key <key>    the business's API key (default: PAYHOOK_API_KEY)              required
  --json             print {"webhook_urls": [...]} (and, for add and remove, what changed)
  -h, --help         show this help

Exit codes: 0 done (also adding a URL already registered); 1 the sender refused (the URL, or
the key: its reason is shown) or remove found no such URL; 2 bad usage; 3 the sender cannot be
reached.

Examples:
  payhook endpoints add http://localhost:3000/webhooks --api-key sk_test_...
  payhook endpoints list --base-url https://sandbox.example --json
  payhook endpoints remove http://localhost:3000/webhooks`,
  async run(argv, io) {
    const [action, ...rest] = argv;
    if (!ACTIONS.includes(action as (typeof ACTIONS)[number])) {
      const suggestion = action && closest(action, ACTIONS);
      throw new CliError(
        `${action ? `Unknown action ${JSON.stringify(action)}: use` : 'Give'} add, list or remove.${suggestion ? ` Did you mean ${suggestion}?` : ''} See: payhook endpoints --help`,
      );
    }
    const { values, positionals } = parse(
      'endpoints',
      rest,
      { 'base-url': { type: 'string' }, 'api-key': { type: 'string' }, json: { type: 'boolean' } },
      action === 'list' ? 0 : 1,
    );
    let url: string | undefined;
    if (action !== 'list') {
      const typed = required(positionals[0], '<url>', 'endpoints');
      const parsed = receiverUrl(typed);
      if (!parsed) throw new CliError(`<url> must be an http(s) URL, not ${JSON.stringify(typed)}.`);
      url = parsed.href;
    }
    const baseUrl = senderUrl(values['base-url'] ?? DEFAULT_SENDER_URL);
    const apiKey = values['api-key'] || io.env.PAYHOOK_API_KEY;
    if (!apiKey) {
      throw new CliError(
        '--api-key (or PAYHOOK_API_KEY) is required: the key of the business whose URLs these are (`payhook serve` prints a test key on its first start).',
      );
    }
    const list = settingsEndpoints(new SenderApi({ baseUrl, apiKey }));
    try {
      return await act(list, action as (typeof ACTIONS)[number], url, values.json === true, io);
    } catch (error) {
      throw refusal(error, baseUrl);
    }
  },
};

/** Does `action`, prints what came of it, resolves to the exit code. */
async function act(
  list: WebhookEndpoints,
  action: (typeof ACTIONS)[number],
  url: string | undefined,
  json: boolean,
  io: Io,
): Promise<number> {
  const say = (line: string) => io.stdout.write(`${line}\n`);
  const show = (urls: readonly string[]) => {
    if (urls.length === 0) {
      say('No webhook URL is registered now: events go to no URL (a `payhook listen` still gets them).');
    } else {
      say(
        `The sender delivers every event to ${urls.length === 1 ? 'this URL' : `these ${urls.length} URLs`}:`,
      );
      for (const registered of urls) say(`  ${registered}`);
    }
  };
  if (action === 'list') {
    const urls = await list.list();
    if (json) printJson(io, { webhook_urls: urls });
    else if (urls.length === 0) {
      say('No webhook URL is registered. Add one: payhook endpoints add http://localhost:3000/webhooks');
    } else show(urls);
    return EXIT.ok;
  }
  const target = url as string;
  if (action === 'add') {
    const { urls, changed } = await list.add(target);
    if (json) printJson(io, { url: target, changed, webhook_urls: urls });
    else {
      say(changed ? `Added ${target}.` : `${target} is already registered: nothing changed.`);
      show(urls);
    }
    return EXIT.ok;
  }
  const { urls, removed } = await list.remove(target);
  if (json) printJson(io, { url: target, removed: removed ?? null, webhook_urls: urls });
  else if (removed === undefined) {
    io.stderr.write(
      `${target} is not registered: nothing removed.${urls.length > 0 ? ` Registered:\n${urls.map((u) => `  ${u}`).join('\n')}` : ' No URL is registered.'}\n`,
    );
  } else {
    say(`Removed ${removed}.`);
    show(urls);
  }
  return removed === undefined ? EXIT.failed : EXIT.ok;
}

/** The one-line error for what went wrong on the way to the sender, with its exit code. */
function refusal(error: unknown, baseUrl: string): unknown {
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
    return new CliError(`${error.message.replace(/\.$/, '')}.${hint}`, EXIT.failed);
  }
  if (error instanceof SenderUnreachableError) {
    return new CliError(`${error.message} Is it running? \`payhook serve\` starts one.`, EXIT.error);
  }
  return error;
}
