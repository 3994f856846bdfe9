/** The webhook path an adapter serves, matched with and without a trailing slash. */
export interface WebhookPath {
  /** The path as given, without its trailing slashes (`/` for the root). */
  readonly path: string;
  /** The paths that match, for frameworks that register routes: the path, and the path with a slash. */
  readonly urls: readonly string[];
  /** Whether a request path (without its query string) is the webhook path. */
  matches(pathname: string): boolean;
}

/**
 * Validates a webhook path at creation (a TypeError names the bad value) and returns its matcher.
 * `/webhooks` matches `/webhooks` and `/webhooks/`; `/` matches `/` and the empty path, which is
 * how a framework that strips its mount point (Express's `app.use(path)`) sees the path itself.
 *
 * @example
 * ```ts
 * const webhook = createWebhookPath('/webhooks/');
 * webhook.matches('/webhooks'); // true
 * webhook.matches('/webhooks/health'); // false
 * webhook.urls; // ['/webhooks', '/webhooks/']
 * ```
 */
export function createWebhookPath(path: string): WebhookPath {
  if (typeof path !== 'string' || !path.startsWith('/')) {
    throw new TypeError(`Invalid path: ${String(path)} (expected a path starting with "/").`);
  }
  const stem = path.replace(/\/+$/, '');
  // Both forms are kept as strings, so that a match is two comparisons and builds nothing.
  const slashed = `${stem}/`;
  return {
    path: stem || '/',
    urls: stem === '' ? ['/'] : [stem, slashed],
    matches: (pathname) => pathname === stem || pathname === slashed,
  };
}
