import { CliError } from './command.js';

/** Where `payhook serve` listens by default: the sender the commands that call one look for first. */
export const DEFAULT_SENDER_URL = 'http://127.0.0.1:8080';

/**
 * An http(s) URL from what a person types for a local receiver: a URL as it is; without a scheme
 * (`localhost:3000/webhooks`) as `http://`; a bare port (`3000`, `:3000/webhooks`) on
 * `http://localhost`. `completed` says a part was added, so the caller can show the URL it uses.
 *
 * @example
 * ```ts
 * receiverUrl('localhost:3000/webhooks'); // { href: 'http://localhost:3000/webhooks', completed: true }
 * receiverUrl('ftp://host/'); // undefined
 * ```
 */
export function receiverUrl(input: string): { href: string; completed: boolean } | undefined {
  const text = input.trim();
  let candidate = text;
  if (/^\d+(\/|$)/.test(text)) candidate = `http://localhost:${text}`;
  else if (/^:\d+(\/|$)/.test(text)) candidate = `http://localhost${text}`;
  else if (!/^[a-z][a-z\d+.-]*:\/\//i.test(text)) candidate = `http://${text}`;
  try {
    const url = new URL(candidate);
    if (url.protocol === 'http:' || url.protocol === 'https:') {
      return candidate === text ? { href: text, completed: false } : { href: url.href, completed: true };
    }
  } catch {}
  return undefined;
}

/**
 * A sender's base URL from `--base-url`: http(s) and without credentials (the API key is the
 * credential), or a usage error naming the flag.
 */
export function senderUrl(value: string, flag = '--base-url'): string {
  let url: URL;
  try {
    url = new URL(value);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('not http');
  } catch {
    throw new CliError(
      `${flag} must be an http(s) URL, such as ${DEFAULT_SENDER_URL}, not ${JSON.stringify(value)}.`,
    );
  }
  if (url.username || url.password) {
    throw new CliError(`${flag} must not carry a user name or password: the API key is the credential.`);
  }
  return value;
}
