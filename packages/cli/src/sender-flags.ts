import { CliError, type Values } from './command.js';
import { DEFAULT_SENDER_URL, senderUrl } from './urls.js';

/** The flags of a command that calls a running sender: where it is, and the business's API key. */
export const senderOptions = {
  'base-url': { type: 'string' },
  'api-key': { type: 'string' },
} as const;

/** The values of {@link senderOptions}. */
export type SenderFlags = Values<typeof senderOptions>;

/**
 * The sender a command calls and the key it calls with: `--base-url` (by default the sender
 * `payhook serve` runs), and `--api-key` or else PAYHOOK_API_KEY. Without a key, a usage error:
 * "--api-key (or PAYHOOK_API_KEY) is required" followed by `missing`, what the key is for.
 */
export function senderOf(
  flags: SenderFlags,
  env: Record<string, string | undefined>,
  missing: string,
): { baseUrl: string; apiKey: string } {
  const baseUrl = senderUrl(flags['base-url'] ?? DEFAULT_SENDER_URL);
  const apiKey = flags['api-key'] || env.PAYHOOK_API_KEY;
  if (!apiKey) throw new CliError(`--api-key (or PAYHOOK_API_KEY) is required${missing}`);
  return { baseUrl, apiKey };
}
