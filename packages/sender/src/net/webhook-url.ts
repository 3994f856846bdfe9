import { lookup as dnsLookup } from 'node:dns/promises';
import { type AddressClass, classifyAddress } from './public-address.js';

/** Resolves a host name to all its addresses (injectable for tests; default: the system resolver). */
export type Resolver = (hostname: string) => Promise<readonly string[]>;

/** The system resolver: every A and AAAA address of a host. */
export const systemResolver: Resolver = async (hostname) =>
  (await dnsLookup(hostname, { all: true, verbatim: true })).map((entry) => entry.address);

/** Options of {@link checkWebhookUrl}. */
export interface CheckWebhookUrlOptions {
  /** Resolves host names (default: the system resolver). */
  resolve?: Resolver;
  /** Let private, loopback and other non-public addresses through (local development only). */
  allowPrivate?: boolean;
}

/** The verdict on a webhook URL. */
export type WebhookUrlCheck =
  | {
      ok: true;
      url: URL;
      /** The vetted addresses: connect to one of these, never to a fresh lookup of the name. */
      addresses: string[];
    }
  | {
      ok: false;
      /** Stable reason: `invalid_url`, `unsupported_scheme`, `credentials_in_url`, `unresolvable_host` or `non_public_address`. */
      code:
        | 'invalid_url'
        | 'unsupported_scheme'
        | 'credentials_in_url'
        | 'unresolvable_host'
        | 'non_public_address';
      message: string;
      /** For `non_public_address`: each address and its class. */
      addresses?: { address: string; class: AddressClass }[];
    };

/**
 * Checks that a webhook URL may receive events: http or https, no credentials, and a host that is,
 * or resolves only to, public unicast addresses. IP literals in every form the WHATWG URL parser
 * reads (decimal `2130706433`, octal `0177.0.0.1`, hex `0x7f.1`, short `127.1`, bracketed IPv6)
 * are normalized by that parser first, so the check sees the address a client would connect to.
 * Every resolved address must be public: one private answer refuses the URL. The vetted
 * addresses are returned so that the connection can be pinned to them (no DNS rebinding).
 *
 * @example
 * ```ts
 * const check = await checkWebhookUrl('https://merchant.example/webhooks/');
 * if (!check.ok) reply.code(422).send({ error: { code: check.code, message: check.message } });
 * ```
 */
export async function checkWebhookUrl(
  input: string,
  options: CheckWebhookUrlOptions = {},
): Promise<WebhookUrlCheck> {
  let url: URL;
  try {
    url = new URL(input);
  } catch {
    return { ok: false, code: 'invalid_url', message: `${JSON.stringify(input)} is not a valid URL.` };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return {
      ok: false,
      code: 'unsupported_scheme',
      message: `Webhook URLs use http or https, not ${url.protocol}`,
    };
  }
  if (url.username || url.password) {
    return { ok: false, code: 'credentials_in_url', message: 'Webhook URLs may not carry credentials.' };
  }
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  let addresses: string[];
  if (classifyAddress(host) !== 'invalid') {
    addresses = [host];
  } else {
    try {
      addresses = [...(await (options.resolve ?? systemResolver)(host))];
    } catch (cause) {
      return {
        ok: false,
        code: 'unresolvable_host',
        message: `${host} could not be resolved (${(cause as Error).message}).`,
      };
    }
    if (addresses.length === 0)
      return { ok: false, code: 'unresolvable_host', message: `${host} has no address.` };
  }
  if (options.allowPrivate) return { ok: true, url, addresses };
  const classes = addresses.map((address) => ({ address, class: classifyAddress(address) }));
  const refused = classes.filter((c) => c.class !== 'public');
  if (refused.length > 0) {
    return {
      ok: false,
      code: 'non_public_address',
      message: `${host} is or resolves to a non-public address (${refused.map((c) => `${c.address}: ${c.class}`).join(', ')}); webhook URLs must be publicly reachable. For a receiver on your own machine or network, in development only, start the sender with \`payhook serve --allow-private-webhooks\` (PAYHOOK_ALLOW_PRIVATE_WEBHOOKS=1).`,
      addresses: classes,
    };
  }
  return { ok: true, url, addresses };
}
