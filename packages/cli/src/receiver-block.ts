import type { Io } from './command.js';
import { commandLine } from './invocation.js';
import { type LogFormat, say } from './log-format.js';
import { DEFAULT_SENDER_URL } from './urls.js';

/**
 * The addresses a sender on this machine delivers from to a receiver on this machine: the
 * loopback addresses (IPv4 and IPv6, as `localhost` may resolve to either).
 */
export const LOCAL_ALLOWED_IPS = '127.0.0.1,::1';

/** The URL the quickstart receivers listen on. */
export const QUICKSTART_RECEIVER_URL = 'http://localhost:3000/webhooks';

/** What `payhook serve` knows at the end of its start, for the receiver's settings. */
export interface ReceiverBlock {
  businessId: string;
  /** The business's current signing secret (`whsec_...`) in the key's mode. */
  webhookSecret: string | undefined;
  /** Where the sender listens. */
  senderUrl: string;
  /** The full API key made on this start, if one was: the only time it is known. */
  apiKey: string | undefined;
  /** The API key's variable is set in this environment already. */
  apiKeyInEnv: boolean;
  /** The sender takes webhook URLs on private and loopback addresses (`--allow-private-webhooks`). */
  allowPrivateWebhooks: boolean;
}

/**
 * The lines `payhook serve` ends its start with: the variables a quickstart receiver reads
 * (`BUSINESS_ID`, `WEBHOOK_SECRET`, `ALLOWED_IPS`) as `export` lines, then the `payhook endpoints
 * add` command that registers its URL with this sender, written as the sender was run (see
 * {@link commandLine}); notes are shell comments, so that the whole block can be pasted. For a
 * machine, two JSON lines with the same values as fields.
 *
 * @example
 * ```ts
 * sayReceiverBlock('pretty', io, { businessId, webhookSecret, senderUrl: sender.url, apiKey,
 *   apiKeyInEnv: false, allowPrivateWebhooks: true });
 * ```
 */
export function sayReceiverBlock(format: LogFormat, io: Io, block: ReceiverBlock): void {
  const flags = [
    ...(block.senderUrl === DEFAULT_SENDER_URL ? [] : [`--base-url ${block.senderUrl}`]),
    ...(block.apiKey ? [`--api-key ${block.apiKey}`] : []),
  ];
  const command = commandLine(['endpoints add', QUICKSTART_RECEIVER_URL, ...flags].join(' '), io.env);
  const keyNote =
    block.apiKey || block.apiKeyInEnv
      ? ''
      : '   # with your test key in PAYHOOK_API_KEY (or --api-key sk_test_...)';
  const privateNote = block.allowPrivateWebhooks
    ? []
    : ['# refused for localhost until this sender runs with --allow-private-webhooks (local only)'];
  const secret = block.webhookSecret ?? '';
  if (format === 'json') {
    say(
      format,
      io,
      `Receivers verify with BUSINESS_ID=${block.businessId} WEBHOOK_SECRET=${secret} ALLOWED_IPS=${LOCAL_ALLOWED_IPS}`,
      { businessId: block.businessId, webhookSecret: secret, allowedIps: LOCAL_ALLOWED_IPS },
    );
    say(format, io, `Register the receiver's URL: ${command}`, {
      command,
      ...(privateNote.length > 0 ? { note: privateNote[0]?.slice(2) } : {}),
    });
    return;
  }
  say(
    format,
    io,
    [
      '',
      "Receivers verify with these (paste them into the receiver's shell):",
      `  export BUSINESS_ID=${block.businessId}`,
      `  export WEBHOOK_SECRET=${secret}`,
      `  export ALLOWED_IPS=${LOCAL_ALLOWED_IPS}`,
      "Register the receiver's URL with this sender (in another terminal):",
      ...privateNote.map((note) => `  ${note}`),
      `  ${command}${keyNote}`,
    ].join('\n'),
  );
}
