import type { EndpointSecretView, WebhookEndpointView } from '@payhook/sender';
import { type ApiCall, type SenderApi, SenderRefusedError } from './sender-api.js';

/** A webhook endpoint as the sender's `/webhook-endpoints` answers it (the sender's own type). */
export type Endpoint = WebhookEndpointView;

/** A signing secret, or for v1a a public key, of an endpoint (the sender's own type). */
export type EndpointSecret = EndpointSecretView;

interface Settings {
  require_mfa: boolean;
  webhook_urls: string[];
}

/** What a new endpoint takes besides its URL. */
export interface EndpointOptions {
  events?: readonly string[];
  scheme?: 'v1' | 'v1a';
  description?: string;
}

/**
 * The webhook endpoints of the API key's business (in the key's mode), read and changed on a
 * sender through `/webhook-endpoints`. `payhook endpoints` goes through this alone.
 */
export interface WebhookEndpoints {
  /** Every endpoint, oldest first. */
  list(): Promise<Endpoint[]>;
  /**
   * Makes an endpoint for `url` unless one has that URL already (it is then left as it is);
   * resolves to the endpoints after, the one for `url`, and whether one was made. A v1 endpoint
   * is added to the settings' webhook_urls, as before endpoints, so it signs with the business's
   * secrets (those `payhook serve` prints), then given its filter and description; a v1a one is
   * made with its own Ed25519 key pair.
   */
  add(
    url: string,
    options?: EndpointOptions,
  ): Promise<{ endpoints: Endpoint[]; endpoint: Endpoint; changed: boolean }>;
  /** An endpoint's signing secrets, or its public keys (v1a), current first. */
  secrets(endpoint: Endpoint): Promise<EndpointSecret[]>;
  /** The endpoint `ref` names: its id, or its URL (as typed, or once both are parsed). */
  find(ref: string): Promise<{ endpoints: Endpoint[]; endpoint: Endpoint | undefined }>;
  /** Deletes an endpoint; resolves to the endpoints after. */
  remove(endpoint: Endpoint): Promise<Endpoint[]>;
  /** Enables or disables an endpoint; resolves to it as it is after. */
  setStatus(endpoint: Endpoint, status: 'enabled' | 'disabled'): Promise<Endpoint>;
  /**
   * Rotates an endpoint's own secret (its key pair for v1a): a new one becomes current, the
   * previous one is still signed with for `overlapSeconds`. Resolves to its secrets after, current
   * first. The sender refuses (409 invalid_state) an endpoint signed with the business's secrets.
   */
  rotate(endpoint: Endpoint, overlapSeconds?: number): Promise<EndpointSecret[]>;
  /** Recovers a window of the endpoint's failed deliveries; resolves to how many were queued. */
  recover(
    endpoint: Endpoint,
    window: { since: string; until?: string },
  ): Promise<{ queued: number; since: string; until: string }>;
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
 * {@link WebhookEndpoints} over the sender's `/webhook-endpoints` resource. A refused URL is a
 * {@link UrlsRefusedError} naming it with the sender's reason.
 *
 * @example
 * ```ts
 * const endpoints = endpointsResource(new SenderApi({ baseUrl, apiKey }));
 * const { endpoint, changed } = await endpoints.add('http://localhost:3000/webhooks', { events: ['*'] });
 * ```
 */
export function endpointsResource(api: SenderApi): WebhookEndpoints {
  const dataOf = <T>(answer: { data?: T }): T => {
    if (answer.data === undefined || answer.data === null) {
      throw new SenderRefusedError(
        api.calls.at(-1) as ApiCall,
        undefined,
        'the answer carries no data; is --base-url a payhook sender with webhook endpoints?',
      );
    }
    return answer.data;
  };
  // The API lists newest first, at most 20 a business: one page, shown oldest first (the order of
  // the settings' webhook_urls).
  const list = async () =>
    dataOf(await api.get<{ data: Endpoint[] }>('/webhook-endpoints?limit=100')).sort(
      (a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id),
    );
  /** Runs `write`; a refusal naming the URL (`url`, or its place in webhook_urls) becomes a {@link UrlsRefusedError}. */
  const refusedUrl = async <T>(url: string, write: () => Promise<T>): Promise<T> => {
    try {
      return await write();
    } catch (error) {
      const refused =
        error instanceof SenderRefusedError
          ? error.fields.filter((f) => f.field === 'url' || /^webhook_urls\.\d+$/.test(f.field))
          : [];
      if (refused.length > 0) {
        throw new UrlsRefusedError(
          refused.map((f) => ({ url, message: f.message })),
          error as SenderRefusedError,
        );
      }
      throw error;
    }
  };
  const path = (endpoint: Endpoint) => `/webhook-endpoints/${encodeURIComponent(endpoint.id)}`;
  const byRef = (endpoints: Endpoint[], ref: string) =>
    endpoints.find((e) => e.id === ref) ??
    endpoints.find((e) => e.url === ref) ??
    endpoints.find((e) => sameUrl(e.url, ref));
  return {
    list,
    async add(url, options = {}) {
      const current = await list();
      const present = current.find((e) => e.url === url) ?? current.find((e) => sameUrl(e.url, url));
      if (present) return { endpoints: current, endpoint: present, changed: false };
      let endpoint: Endpoint;
      if (options.scheme === 'v1a') {
        // Ed25519: an endpoint of its own, whose key pair the sender makes.
        endpoint = await refusedUrl(url, async () =>
          dataOf(
            await api.post<{ data: Endpoint }>('/webhook-endpoints', {
              url,
              signature_scheme: 'v1a',
              ...(options.events ? { enabled_events: options.events } : {}),
              ...(options.description !== undefined ? { description: options.description } : {}),
            }),
          ),
        );
      } else {
        // As before: a URL of the settings' webhook_urls, signed with the business's secrets (the
        // ones `payhook serve` prints); then its filter and description, when given.
        const settings = dataOf(await api.get<{ data: Settings }>('/accounts/settings'));
        const urls = Array.isArray(settings.webhook_urls) ? settings.webhook_urls : [];
        await refusedUrl(url, async () => {
          await api.patch('/accounts/settings', {
            require_mfa: settings.require_mfa === true,
            webhook_urls: [...urls, url],
          });
        });
        const made = [...(await list())].reverse().find((e) => e.url === url);
        if (!made)
          throw new SenderRefusedError(
            api.calls.at(-1) as ApiCall,
            undefined,
            `no endpoint has ${url} after adding it`,
          );
        endpoint = made;
        if (options.events || options.description !== undefined) {
          endpoint = dataOf(
            await api.patch<{ data: Endpoint }>(path(endpoint), {
              ...(options.events ? { enabled_events: options.events } : {}),
              ...(options.description !== undefined ? { description: options.description } : {}),
            }),
          );
        }
      }
      return { endpoints: await list(), endpoint, changed: true };
    },
    async secrets(endpoint) {
      return dataOf(await api.get<{ data: EndpointSecret[] }>(`${path(endpoint)}/signing-secrets`));
    },
    async find(ref) {
      const endpoints = await list();
      return { endpoints, endpoint: byRef(endpoints, ref) };
    },
    async remove(endpoint) {
      await api.delete(path(endpoint));
      return list();
    },
    async setStatus(endpoint, status) {
      return dataOf(await api.patch<{ data: Endpoint }>(path(endpoint), { status }));
    },
    async rotate(endpoint, overlapSeconds) {
      return dataOf(
        await api.post<{ data: EndpointSecret[] }>(
          `${path(endpoint)}/signing-secrets/rotate`,
          overlapSeconds === undefined ? {} : { overlap_seconds: overlapSeconds },
        ),
      );
    },
    async recover(endpoint, window) {
      return dataOf(
        await api.post<{ data: { queued: number; since: string; until: string } }>(
          `${path(endpoint)}/recover`,
          {
            since: window.since,
            ...(window.until ? { until: window.until } : {}),
          },
        ),
      );
    },
  };
}
