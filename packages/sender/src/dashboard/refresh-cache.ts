import type { FastifyRequest } from 'fastify';

/** The header the page's script sends on a live refresh (never on a navigation or after an action). */
export const REFRESH_HEADER = 'x-payhook-refresh';

/** How long a page rendered for a live refresh is served to the other refreshes of its business. */
const TTL_MS = 1000;
const MAX_ENTRIES = 1000;
/** How long a refresh waits for another's render before it renders its own. */
const WAIT_MS = 5000;
/** Where a kept page had its session's CSRF token: a NUL, which no rendered text can hold. */
const TOKEN_MARK = '\u0000csrf\u0000';

/** The session's CSRF token of a signed-in dashboard request. */
const tokenOf = (request: FastifyRequest) => request.dashboard?.csrfToken ?? '';

/**
 * Pages rendered for live refreshes, per business, mode and URL, for one second: fifty open
 * dashboards of one business reloading their events list after a message (which reaches them all
 * at once) cost one render, not fifty. Refreshes that arrive while that render runs wait for it
 * rather than render again. Only refreshes read it (a page opened or reloaded by its user is
 * always rendered), and only once the session was checked: the key holds the signed-in principal.
 * A page is kept without its session's CSRF token and served with the token of the session that
 * asks: sessions of one business share renders, never tokens.
 */
export function createRefreshCache() {
  const pages = new Map<string, { at: number; body: string }>();
  /** Renders under way, by key: what the refreshes that arrive meanwhile wait for. */
  const rendering = new Map<string, { done: Promise<string | undefined>; finish: (body?: string) => void }>();
  /** The refresh that renders each key's page (its response fills the cache and wakes the others). */
  const renderers = new WeakMap<FastifyRequest, string>();
  /** Refreshes answered from the cache: their page is not kept again (its age would restart). */
  const served = new WeakSet<FastifyRequest>();

  const keyOf = (request: FastifyRequest) => {
    if (request.method !== 'GET' || request.headers[REFRESH_HEADER] !== 'live' || !request.dashboard)
      return undefined;
    const { businessId, mode } = request.dashboard.principal;
    return `${mode}\n${businessId}\n${request.url}`;
  };
  const finish = (request: FastifyRequest, body?: string) => {
    const key = renderers.get(request);
    if (key === undefined) return;
    renderers.delete(request);
    rendering.get(key)?.finish(body);
    rendering.delete(key);
  };

  return {
    /**
     * The page a refresh may be answered with: a fresh one, or the one being rendered; undefined
     * when this request should render it.
     */
    async get(request: FastifyRequest): Promise<string | undefined> {
      const key = keyOf(request);
      if (key === undefined) return undefined;
      const own = (body: string) => body.split(TOKEN_MARK).join(tokenOf(request));
      const hit = pages.get(key);
      if (hit && Date.now() - hit.at < TTL_MS) {
        served.add(request);
        return own(hit.body);
      }
      const under = rendering.get(key);
      if (under) {
        // A render that never answers (its client gone mid-way) holds no one for long.
        const body = await Promise.race([
          under.done,
          new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), WAIT_MS).unref()),
        ]);
        if (body === undefined) return undefined;
        served.add(request);
        return own(body);
      }
      let done!: (body?: string) => void;
      const promise = new Promise<string | undefined>((resolve) => {
        done = resolve;
      });
      rendering.set(key, { done: promise, finish: done });
      renderers.set(request, key);
      return undefined;
    },
    /** Keeps a refresh's page (and hands it to the refreshes waiting for it). */
    set(request: FastifyRequest, body: string): void {
      const key = keyOf(request);
      if (key === undefined || served.has(request)) return;
      if (pages.size >= MAX_ENTRIES) {
        const now = Date.now();
        for (const [k, v] of pages) if (now - v.at >= TTL_MS) pages.delete(k);
        if (pages.size >= MAX_ENTRIES) pages.clear();
      }
      const token = tokenOf(request);
      const kept = token === '' ? body : body.split(token).join(TOKEN_MARK);
      pages.set(key, { at: Date.now(), body: kept });
      finish(request, kept);
    },
    /** A request has been answered: if it was rendering a page that was not kept, the waiting refreshes render their own. */
    done(request: FastifyRequest): void {
      finish(request);
    },
  };
}
