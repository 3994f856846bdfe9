import { KNOWN_EVENTS } from '@payhook/core';
import type { Static } from 'typebox';
import type { Delivery, EventSummary as EventSchema } from '../http/events.js';
import { type Html, html } from './html.js';
import {
  apiErrorBox,
  csrfField,
  notice,
  outcomeBadge,
  type PageContext,
  page,
  statusBadge,
  when,
} from './layout.js';

/** An event as `GET /events` answers it (the API's own schema). */
export type EventSummary = Static<typeof EventSchema>;

/** An event as `GET /events/{id}` answers it. */
export type EventDetail = EventSummary & { deliveries: Static<typeof Delivery>[] };

/** The filters of the events list, as the page's query has them. */
export interface EventFilters {
  type?: string | undefined;
  delivery_status?: string | undefined;
  created_after?: string | undefined;
  created_before?: string | undefined;
}

const DELIVERY_STATUSES = ['pending', 'delivered', 'failed', 'none'];

/** Keeps the filters in a pager's link. */
function pageLink(filters: EventFilters, cursor: Record<string, string>): string {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries({ ...filters, ...cursor })) if (value) query.set(key, value);
  return `/dashboard/events?${query}`;
}

/** The events list: filters, a cursor-paged table (newest first), and redelivery of failures. */
export function eventsPage(
  context: PageContext,
  data: {
    events: EventSummary[];
    pagination: { after: string; before: string };
    filters: EventFilters;
    firstPage: boolean;
    notice?: string | undefined;
    error?: { message: string; details?: { field: string; message: string }[] } | undefined;
  },
): Html {
  const { events, pagination, filters } = data;
  const options = (values: string[], selected: string | undefined) =>
    values.map((v) => html`<option value="${v}"${v === selected ? html` selected` : ''}>${v}</option>`);
  const content = html`<h1>Events</h1>${notice(data.notice)}${apiErrorBox(data.error)}
<form class="filters" method="get" action="/dashboard/events" aria-label="Filter events">
  <label>Type <select name="type"><option value="">Any type</option>${options([...KNOWN_EVENTS], filters.type)}</select></label>
  <label>Delivery status <select name="delivery_status"><option value="">Any status</option>${options(DELIVERY_STATUSES, filters.delivery_status)}</select></label>
  <label>Created after (UTC) <input type="datetime-local" name="created_after" value="${filters.created_after ?? ''}" step="1"></label>
  <label>Created before (UTC) <input type="datetime-local" name="created_before" value="${filters.created_before ?? ''}" step="1"></label>
  <button type="submit">Filter</button> <a href="/dashboard/events">Clear</a>
</form>
<div id="events-table" class="table-wrap" ${data.firstPage ? html`data-live-region` : ''}>
<table class="stack linked-rows"><caption>${events.length === 0 ? 'No events match.' : `Newest first: ${events.length} on this page.`}</caption>
<thead><tr><th scope="col">Created</th><th scope="col">Type</th><th scope="col">Delivery</th><th scope="col">Payment</th><th scope="col">Event</th></tr></thead>
<tbody>${events.map(
    (
      e,
    ) => html`<tr><td data-label="Created">${when(e.created_at)}</td><td data-label="Type"><a class="row-link" href="/dashboard/events/${e.id}"><code>${e.type}</code><span class="skip"> event ${e.id}</span></a></td><td data-label="Delivery">${statusBadge(e.delivery_status)}</td>
<td data-label="Payment" class="mono">${e.payment_id ?? '—'}</td><td data-label="Event" class="mono">${e.id}</td></tr>`,
  )}</tbody></table>
</div>
<nav class="pager" aria-label="Pages">${
    pagination.before
      ? html`<a href="${pageLink(filters, { before: pagination.before })}" rel="prev">← Newer</a>`
      : ''
  }${pagination.after ? html`<a href="${pageLink(filters, { after: pagination.after })}" rel="next">Older →</a>` : ''}</nav>
<h2 id="redeliver-title">Redeliver failed deliveries</h2>
<form class="row" method="post" action="/dashboard/events/redeliver" aria-labelledby="redeliver-title">${csrfField(context)}
  <label>Failed since (UTC) <input type="datetime-local" name="since" required step="1"></label>
  <button type="submit">Redeliver failed</button>
  <span class="muted">Only failed deliveries are sent again; delivered and pending ones are left alone.</span>
</form>`;
  return page(context, { title: 'Events', live: { log: true } }, content);
}

/** One event: its summary and payload first, then redelivery, each delivery and attempt. */
export function eventPage(context: PageContext, event: EventDetail, message?: string): Html {
  const content = html`<p><a href="/dashboard/events">← Events</a></p>
<h1><code>${event.type}</code></h1>${notice(message)}
<dl><dt>Event id</dt><dd class="mono">${event.id}</dd><dt>Created</dt><dd>${when(event.created_at)}</dd>
<dt>Payment</dt><dd class="mono">${event.payment_id ?? '—'}</dd></dl>
<h2 id="payload-title">Payload</h2>
<pre id="payload" tabindex="0" aria-labelledby="payload-title">${JSON.stringify(event.payload, null, 2)}</pre>
<form class="row" method="post" action="/dashboard/events/${event.id}/redeliver">${csrfField(context)}
  <button type="submit" class="primary">Redeliver this event</button>
  <span class="muted">A new delivery to every registered URL, with its own 48 hours.</span></form>
<div id="deliveries" data-live-region>
<p>Delivery status: ${statusBadge(event.delivery_status)}</p>
<h2>Deliveries</h2>
${event.deliveries.length === 0 ? html`<p class="muted">No delivery: no webhook URL was registered when it was made.</p>` : ''}
${event.deliveries.map(
  (d, i) => html`<section aria-labelledby="delivery-${i}">
<h3 id="delivery-${i}"><span class="mono url">${d.url}</span> ${statusBadge(d.status)}</h3>
<p class="muted">${d.attempt_count} attempt${d.attempt_count === 1 ? '' : 's'} · created ${when(d.created_at)}${
    d.next_attempt_at ? html` · next attempt ${when(d.next_attempt_at)}` : ''
  }${d.finished_at ? html` · finished ${when(d.finished_at)}` : ''}${d.superseded_by ? ' · redelivered' : ''}</p>
<div class="table-wrap"><table class="stack"><caption>Attempts to ${d.url}</caption>
<thead><tr><th scope="col">#</th><th scope="col">Time</th><th scope="col">Outcome</th><th scope="col">Latency</th><th scope="col">Error</th><th scope="col">Response</th></tr></thead>
<tbody>${d.attempts.map(
    (
      a,
    ) => html`<tr><td data-label="#">${a.attempt}</td><td data-label="Time">${when(a.started_at)}</td><td data-label="Outcome">${outcomeBadge(a.status_code, a.error?.code)}</td>
<td data-label="Latency">${a.latency_ms} ms</td><td data-label="Error">${a.error ? html`<code>${a.error.code}</code> ${a.error.message}` : '—'}</td>
<td data-label="Response">${a.response_body ? html`<code>${excerpt(a.response_body)}</code>` : html`<span class="muted">empty</span>`}</td></tr>`,
  )}</tbody></table></div></section>`,
)}
</div>`;
  return page(context, { title: `Event ${event.id}`, live: { eventId: event.id } }, content);
}

/** The start of a response body, on one line. */
const excerpt = (body: string) => {
  const line = body.replace(/\s+/g, ' ');
  return line.length > 200 ? `${line.slice(0, 200)}…` : line;
};
