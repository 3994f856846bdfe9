import { html } from './html.js';
import { DOCS_PATH, navigationItems } from './layout.js';

/*
 * The API reference (Swagger UI at /docs) wears the dashboard's navigation: a bar above the UI
 * with the same entries, "API reference" marked, and a link back to the dashboard. The UI
 * package serves these two files as its theme; the page is the UI's own otherwise.
 */

const BAR = html`<header class="payhook-bar"><a class="brand" href="/dashboard">payhook</a>
<nav aria-label="Dashboard"><ul>${navigationItems(DOCS_PATH)}</ul></nav>
<a class="back" href="/dashboard">← Back to the dashboard</a></header>`;

// Scoped to the bar: the UI's own style sheet styles the rest of the page.
const CSS = `
.payhook-bar { display: flex; flex-wrap: wrap; gap: 8px 16px; align-items: center; padding: 10px 20px;
  border-bottom: 1px solid #d0d7de; background: #f6f8fa; font: 15px/1.5 system-ui, sans-serif; color: #1b1f24; }
.payhook-bar a { color: #0969da; }
.payhook-bar a:focus-visible { outline: 3px solid #0969da; outline-offset: 2px; }
.payhook-bar .brand { font-weight: 700; color: #1b1f24; text-decoration: none; display: flex; align-items: center; gap: 6px; }
.payhook-bar .brand::before { content: ""; width: 18px; height: 18px; border-radius: 5px; background: #0969da; }
.payhook-bar ul { display: flex; flex-wrap: wrap; gap: 4px 14px; list-style: none; margin: 0; padding: 0; }
.payhook-bar a[aria-current="page"] { font-weight: 700; text-decoration-thickness: 3px; }
.payhook-bar .back { margin-left: auto; }
`;

// The UI's page loads this last, at the end of its body.
const JS = `document.body.insertAdjacentHTML('afterbegin', ${JSON.stringify(BAR.text)});\n`;

/**
 * The theme files of `@fastify/swagger-ui` that put the dashboard's navigation on the API
 * reference: pass them as its `theme.css` and `theme.js`.
 *
 * @example
 * ```ts
 * await app.register(swaggerUi, { routePrefix: '/docs', theme: { ...DOCS_NAVIGATION, title: 'payhook sender API' } });
 * ```
 */
export const DOCS_NAVIGATION = {
  css: [{ filename: 'payhook-navigation.css', content: CSS }],
  js: [{ filename: 'payhook-navigation.js', content: JS }],
};
