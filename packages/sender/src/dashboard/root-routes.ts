import type { FastifyPluginAsync } from 'fastify';

/**
 * The icon browsers ask for at `/favicon.ico`: a small SVG (a hook on the dashboard's accent
 * colour), served as SVG whatever the path's extension says, which browsers read by its type.
 */
export const FAVICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#0969da"/><path d="M20 6v13a6 6 0 0 1-12 0v-3" fill="none" stroke="#fff" stroke-width="3.5" stroke-linecap="round"/><path d="M5 18l3-4 3 4" fill="none" stroke="#fff" stroke-width="3" stroke-linecap="round" stroke-linejoin="round"/></svg>';

/** The API documentation's top-bar mark: the icon and the name, in the UI bar's white. */
export const DOCS_LOGO_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 150 32" width="150" height="32"><rect width="32" height="32" rx="7" fill="#0969da"/><path d="M20 6v13a6 6 0 0 1-12 0v-3" fill="none" stroke="#fff" stroke-width="3.5" stroke-linecap="round"/><path d="M5 18l3-4 3 4" fill="none" stroke="#fff" stroke-width="3" stroke-linecap="round" stroke-linejoin="round"/><text x="42" y="23" font-family="system-ui, sans-serif" font-size="20" font-weight="600" fill="#fff">payhook</text></svg>';

/**
 * `GET /`, which a person opening the sender's address in a browser asks for, redirects to the
 * dashboard; `GET /favicon.ico`, which every browser asks for, gets the icon. Neither is part of
 * the API: both are kept out of the OpenAPI document.
 *
 * @example
 * ```ts
 * await app.register(rootRoutes);
 * // GET /            -> 302 Location: /dashboard
 * // GET /favicon.ico -> 200 image/svg+xml
 * ```
 */
export const rootRoutes: FastifyPluginAsync = async (app) => {
  app.get('/', { schema: { hide: true } }, async (_request, reply) => reply.redirect('/dashboard', 302));
  app.get('/favicon.ico', { schema: { hide: true } }, async (_request, reply) =>
    reply
      .type('image/svg+xml')
      .header('cache-control', 'public, max-age=86400')
      .header('x-content-type-options', 'nosniff')
      .send(FAVICON_SVG),
  );
};
