import { type ApiCall, type SenderApi, SenderRefusedError } from './sender-api.js';

/**
 * The webhook URLs of the API key's business (in the key's mode), read and changed on a sender.
 * `payhook endpoints` goes through this alone, so that it can move to another resource of the
 * sender without changing the command.
 */
export interface WebhookEndpoints {
  /** The registered URLs, in the sender's order. */
  list(): Promise<string[]>;
  /** Registers `url` unless it is already; resolves to the URLs after, and whether they changed. */
  add(url: string): Promise<{ urls: string[]; changed: boolean }>;
  /**
   * Removes the registered URL equal to `url` (as typed, or once both are parsed); resolves to the
   * URLs after and the one removed, undefined when none matched (nothing is changed then).
   */
  remove(url: string): Promise<{ urls: string[]; removed: string | undefined }>;
}

interface Settings {
  data: { require_mfa: boolean; webhook_urls: string[] };
}

/** The sender refused some of the URLs it was given: each with the sender's reason. */
export class UrlsRefusedError extends Error {
  override readonly name = 'UrlsRefusedError';
  constructor(
    readonly refusals: readonly { url: string; message: string }[],
    /** The sender's answer, with its code (`validation_failed`) and message. */
    readonly refusal: SenderRefusedError,
  ) {
    super(refusals.map((r) => `${r.url}: ${r.message}`).join(' '));
  }
}

/** Whether two URL texts name one URL: equal as typed, or as the URL parser writes them. */
export function sameUrl(a: string, b: string): boolean {
  if (a === b) return true;
  try {
    return new URL(a).href === new URL(b).href;
  } catch {
    return false;
  }
}

/**
 * {@link WebhookEndpoints} over the account settings (`GET` and `PATCH /accounts/settings`): a
 * change reads the settings, changes `webhook_urls` and writes them back with `require_mfa` as it
 * was read (the interface's request carries both). Two changes made at the same moment may lose
 * one of them: the settings are one value, written whole.
 *
 * @example
 * ```ts
 * const endpoints = settingsEndpoints(new SenderApi({ baseUrl, apiKey }));
 * const { urls, changed } = await endpoints.add('http://localhost:3000/webhooks');
 * ```
 */
export function settingsEndpoints(api: SenderApi): WebhookEndpoints {
  const settingsOf = (answer: Settings) => {
    if (!Array.isArray(answer.data?.webhook_urls)) {
      throw new SenderRefusedError(
        api.calls.at(-1) as ApiCall,
        undefined,
        'the answer carries no webhook_urls; is --base-url a payhook sender?',
      );
    }
    return answer.data;
  };
  const read = async () => settingsOf(await api.get<Settings>('/accounts/settings'));
  const write = async (current: Settings['data'], urls: string[]) => {
    try {
      const body = { require_mfa: current.require_mfa === true, webhook_urls: urls };
      return settingsOf(await api.patch<Settings>('/accounts/settings', body)).webhook_urls;
    } catch (error) {
      // The API names a refused URL by its place in the list (`webhook_urls.2`): named by itself here.
      const refusals =
        error instanceof SenderRefusedError
          ? error.fields.flatMap(({ field, message }) => {
              const url = urls[Number(/^webhook_urls\.(\d+)$/.exec(field)?.[1] ?? Number.NaN)];
              return url === undefined ? [] : [{ url, message }];
            })
          : [];
      if (refusals.length > 0) throw new UrlsRefusedError(refusals, error as SenderRefusedError);
      throw error;
    }
  };
  return {
    async list() {
      return (await read()).webhook_urls;
    },
    async add(url) {
      const current = await read();
      if (current.webhook_urls.some((registered) => sameUrl(registered, url))) {
        return { urls: current.webhook_urls, changed: false };
      }
      return { urls: await write(current, [...current.webhook_urls, url]), changed: true };
    },
    async remove(url) {
      const current = await read();
      const removed =
        current.webhook_urls.find((registered) => registered === url) ??
        current.webhook_urls.find((registered) => sameUrl(registered, url));
      if (removed === undefined) return { urls: current.webhook_urls, removed };
      const urls = await write(
        current,
        current.webhook_urls.filter((registered) => registered !== removed),
      );
      return { urls, removed };
    },
  };
}
