import type { Principal } from '../auth/api-keys.js';
import { ASSETS } from './assets.js';
import { type Html, html } from './html.js';

/** The dashboard's top-level views, in the navigation's order. */
export const SECTIONS = [
  { path: '/dashboard/events', label: 'Events' },
  { path: '/dashboard/endpoints', label: 'Endpoints' },
  { path: '/dashboard/payments', label: 'Payments' },
] as const;

/** What every signed-in page shows around its content. */
export interface PageContext {
  principal: Principal;
  csrfToken: string;
  /** The section the page belongs to (marked in the navigation). */
  section: (typeof SECTIONS)[number]['path'];
}

/**
 * A page's options: its `<title>`, and its live stream: the event or the endpoint URL it is about
 * (its live-refreshed parts then follow only their attempts), and whether it shows the attempts
 * as they come (`log`: a table under the content; the other live pages only refresh).
 */
export interface PageOptions {
  title: string;
  live?: { eventId?: string; url?: string; log?: boolean };
}

/** A form's hidden CSRF field. */
export const csrfField = (context: { csrfToken: string }) =>
  html`<input type="hidden" name="_csrf" value="${context.csrfToken}">`;

/** The API reference's address, the navigation's last entry (it leads out of the dashboard). */
export const DOCS_PATH = '/docs';

/** The navigation's entries: the sections, then the API reference; `current` is marked. */
export function navigationItems(current: string): Html {
  return html`${[...SECTIONS, { path: DOCS_PATH, label: 'API reference' }].map(
    (s) =>
      html`<li><a href="${s.path}"${current === s.path ? html` aria-current="page"` : ''}>${s.label}</a></li>`,
  )}`;
}

/** The document around `content`: a skip link, the navigation, who is signed in, sign-out. */
export function page(context: PageContext, options: PageOptions, content: Html): Html {
  const { principal } = context;
  const live = options.live;
  return document(
    options.title,
    html`<a class="skip" href="#main">Skip to content</a>
<header>
  <span class="brand">payhook</span>
  <nav aria-label="Dashboard"><ul>${navigationItems(context.section)}</ul></nav>
  <div class="who"><span>Business <code>${principal.businessId}</code></span>
    <span class="mode">${principal.mode === 'test' ? 'Test mode' : 'Live mode'}</span>
    <form class="inline" method="post" action="/dashboard/sign-out">${csrfField(context)}<button type="submit">Sign out</button></form>
  </div>
</header>
<main id="main" tabindex="-1">${content}${
      live?.log
        ? html`<section class="live" aria-labelledby="live-title"><h2 id="live-title">Live attempts</h2>
  <p id="live-state" class="muted" role="status">Live: connecting...</p>
  <div class="table-wrap"><table class="stack live-table"><caption class="skip">Attempts as they are made, newest first</caption>
  <thead><tr><th scope="col">Time (UTC)</th><th scope="col">Event</th><th scope="col">URL</th><th scope="col">Outcome</th><th scope="col">Latency</th></tr></thead>
  <tbody id="live-log" aria-live="polite" aria-relevant="additions"></tbody></table></div></section>`
        : ''
    }</main>`,
    live ? { live: '/dashboard/live', eventId: live.eventId, url: live.url } : undefined,
  );
}

/** A whole HTML document: the style sheet, and the script on pages with a live stream. */
export function document(
  title: string,
  body: Html,
  live?: { live: string; eventId?: string | undefined; url?: string | undefined },
): Html {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · payhook</title><link rel="icon" href="/favicon.ico" type="image/svg+xml"><link rel="stylesheet" href="/dashboard/assets/${ASSETS.css.file}">
${live ? html`<script src="/dashboard/assets/${ASSETS.js.file}" defer></script>` : ''}</head>
<body${live ? html` data-live="${live.live}"${live.eventId ? html` data-live-event="${live.eventId}"` : ''}${live.url ? html` data-live-url="${live.url}"` : ''}` : ''}>
${body}
</body></html>`;
}

/** A status as words and a symbol, never colour alone. */
export function statusBadge(status: string): Html {
  const symbol = { delivered: '✓', failed: '✗', pending: '…', none: '–' }[status] ?? '';
  return html`<span class="status ${status}">${symbol} ${status}</span>`;
}

/** An attempt's outcome: `200`, `500` or the error code when no response came. */
export function outcomeBadge(statusCode: number | null, errorCode: string | null | undefined): Html {
  const ok = statusCode === 200 && !errorCode;
  return html`<span class="status ${ok ? 'ok' : 'bad'}">${ok ? '✓' : '✗'} ${
    statusCode === null ? (errorCode ?? 'no response') : `HTTP ${statusCode}`
  }</span>`;
}

/** A timestamp for people: `2026-11-25 09:30:12 UTC`, in a `<time>` element. */
export function when(iso: string | null | undefined): Html {
  if (!iso) return html`<span class="muted">—</span>`;
  return html`<time datetime="${iso}">${iso.slice(0, 19).replace('T', ' ')} UTC</time>`;
}

/** A notice after an action (a fixed text per code, so a link cannot put words on the page). */
export function notice(text: string | undefined): Html {
  return text ? html`<p class="notice" role="status">${text}</p>` : html``;
}

/** An error from the API: its message, and each field's. */
export function apiErrorBox(
  error: { message: string; details?: { field: string; message: string }[] } | undefined,
): Html {
  if (!error) return html``;
  return html`<div class="error" role="alert"><p>${error.message}</p>${
    error.details?.length
      ? html`<ul>${error.details.map((d) => html`<li><code>${d.field}</code>: ${d.message}</li>`)}</ul>`
      : ''
  }</div>`;
}
