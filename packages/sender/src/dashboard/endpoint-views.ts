import type { Static } from 'typebox';
import type { FailureView } from '../endpoints/health.js';
import type { EndpointSecret } from '../http/webhook-endpoint-secrets.js';
import type { WebhookEndpoint } from '../http/webhook-endpoints.js';
import type { SecretView, UrlHealth } from './account-views.js';
import { type ChartData, chartSummary, responsiveChart } from './chart.js';
import { type Html, html } from './html.js';
import { apiErrorBox, csrfField, notice, type PageContext, page, when } from './layout.js';

/** An endpoint as `GET /webhook-endpoints/{id}` answers it (the API's own schema). */
export type EndpointView = Static<typeof WebhookEndpoint> & { failure?: FailureView | null };

/** A secret or public key as `GET /webhook-endpoints/{id}/signing-secrets` answers it (the API's own schema). */
export type EndpointSecretView = Static<typeof EndpointSecret>;

type ApiErrorView = { message: string; details?: { field: string; message: string }[] };

/** What the add form had, shown again with the API's refusal. */
export interface EndpointForm {
  url?: string;
  description?: string;
}

/** Status as words and a symbol (never colour alone), with the reason of a disabled one. */
export function endpointStatus(endpoint: Pick<EndpointView, 'status' | 'disabled_reason' | 'failure'>): Html {
  if (endpoint.status === 'disabled') {
    return html`<span class="status failed">⏸ disabled${endpoint.disabled_reason === 'failing' ? ' (failing)' : ''}</span>`;
  }
  const warning = endpoint.failure?.warning;
  if (warning) return html`<span class="status pending">⚠ enabled, failing (${warning} %)</span>`;
  return html`<span class="status delivered">✓ enabled</span>`;
}

/** A filter in words: `every event`, or its types. */
const eventsOf = (events: readonly string[]) =>
  events.includes('*')
    ? html`<span>every event</span>`
    : html`${events.map((e) => html`<code>${e}</code> `)}`;

const scheme = (s: string) => (s === 'v1a' ? 'v1a (Ed25519)' : 'v1 (HMAC-SHA256)');

const percent = (rate: number | null) => (rate === null ? '—' : `${(rate * 100).toFixed(1)} %`);

/** The endpoints view: each endpoint with its status and last 24 hours, adding one, the business's secrets. */
export function endpointsListPage(
  context: PageContext,
  data: {
    endpoints: EndpointView[];
    health: UrlHealth[];
    secrets: SecretView[];
    knownEvents: readonly string[];
    notice?: string | undefined;
    error?: ApiErrorView | undefined;
    form?: EndpointForm;
  },
): Html {
  const healthOf = new Map(data.health.map((h) => [h.url, h]));
  const content = html`<h1>Endpoints</h1>${notice(data.notice)}${apiErrorBox(data.error)}
<div id="endpoints" data-live-region class="table-wrap">
<table class="stack"><caption>Webhook endpoints, with their last 24 hours</caption>
<thead><tr><th scope="col">Endpoint</th><th scope="col">Status</th><th scope="col">Events</th><th scope="col">Success rate</th><th scope="col">Pending</th></tr></thead>
<tbody>${data.endpoints.length === 0 ? html`<tr><td colspan="5">No endpoint yet: events are recorded but not delivered.</td></tr>` : ''}${data.endpoints.map(
    (e) => {
      const h = healthOf.get(e.url);
      return html`<tr><td data-label="Endpoint"><a class="mono url" href="/dashboard/endpoints/${e.id}">${e.url}</a>${e.description ? html`<br><span class="muted">${e.description}</span>` : ''}</td>
<td data-label="Status">${endpointStatus(e)}</td><td data-label="Events">${eventsOf(e.enabled_events)}</td>
<td data-label="Success rate">${h ? html`${percent(h.success_rate)} <span class="muted">of ${h.attempts}</span>` : '—'}</td>
<td data-label="Pending">${h ? h.pending : 0}</td></tr>`;
    },
  )}</tbody></table>
</div>
<h2 id="add-title">Add an endpoint</h2>
<form class="stacked" method="post" action="/dashboard/endpoints" aria-labelledby="add-title">${csrfField(context)}
  <label>URL <input type="url" name="url" required placeholder="https://merchant.example/webhooks" value="${data.form?.url ?? ''}"></label>
  <label>Description <input type="text" name="description" maxlength="1000" placeholder="Orders service" value="${data.form?.description ?? ''}"></label>
  <fieldset><legend>Events</legend>
    <label class="check"><input type="checkbox" name="event:*" checked> Every event</label>
    ${data.knownEvents.map((t) => html`<label class="check"><input type="checkbox" name="event:${t}"> <code>${t}</code></label>`)}
    <p class="muted">Checked types only, when "Every event" is unchecked.</p>
  </fieldset>
  <label>Signature <select name="signature_scheme"><option value="v1">v1: HMAC-SHA256 (whsec_ secret)</option><option value="v1a">v1a: Ed25519 (whpk_ public key)</option></select></label>
  <div><button type="submit" class="primary">Add endpoint</button></div>
</form>
<h2 id="secrets-title">Business signing secrets</h2>
<p class="muted">Endpoints made through the settings' <code>webhook_urls</code> are signed with these (Standard Webhooks); an endpoint made here has its own, on its page. During a rotation both are signed with.</p>
${secretsTable(data.secrets, 'secrets-title')}
<form class="row" method="post" action="/dashboard/endpoints/rotate-secret">${csrfField(context)}
  <label>Keep the previous secret for ${overlapSelect()}</label>
  <button type="submit">Rotate the secret</button>
</form>`;
  return page(context, { title: 'Endpoints', live: {} }, content);
}

const overlapSelect = () =>
  html`<select name="overlap_seconds"><option value="86400">24 hours</option><option value="3600">1 hour</option><option value="0">no time (it leaked)</option></select>`;

/** Secrets, each revealed on demand (they are shown only to their business, and never cached). */
function secretsTable(secrets: readonly EndpointSecretView[], labelledBy: string): Html {
  return html`<div class="table-wrap"><table class="stack" aria-labelledby="${labelledBy}"><thead><tr><th scope="col">Secret</th><th scope="col">State</th><th scope="col">Created</th><th scope="col">Valid until</th></tr></thead>
<tbody>${secrets.map((s) => {
    const value = s.public_key ?? s.secret ?? '';
    return html`<tr><td data-label="Secret"><details><summary>${value.slice(0, 10)}… (show${s.public_key ? ' public key' : ''})</summary><code class="secret">${value}</code></details></td>
<td data-label="State">${s.current ? 'current' : 'previous'}</td><td data-label="Created">${when(s.created_at)}</td><td data-label="Valid until">${s.expires_at ? when(s.expires_at) : 'no end'}</td></tr>`;
  })}</tbody></table></div>`;
}

/** What the endpoint's failure means, when it has one or was disabled for it. */
function failureBox(endpoint: EndpointView): Html {
  const f = endpoint.failure;
  if (endpoint.status === 'disabled') {
    return html`<div class="${endpoint.disabled_reason === 'failing' ? 'error' : 'info'}" role="status"><p><strong>Disabled${endpoint.disabled_reason === 'failing' ? ' after failing' : ''}.</strong> Nothing is sent to it; its pending deliveries are kept, and go out, each with a fresh 48 hours, once it is enabled again.${f ? html` Every attempt since ${when(f.failing_since)} failed (${f.failed_attempts}).` : ''}</p></div>`;
  }
  if (!f) return html``;
  // Failing is never drawn as a success: amber while it is enabled, red once disabled for it.
  return html`<div class="warning" role="status"><p><strong>${f.warning ? `Warning: ${f.warning} %.` : 'Failing.'}</strong> Every attempt since ${when(f.failing_since)} failed (${f.failed_attempts} attempt${f.failed_attempts === 1 ? '' : 's'}, the last ${when(f.last_failure_at)}).${f.disables_at ? html` Unless one succeeds it is disabled at ${when(f.disables_at)}.` : ''}</p></div>`;
}

/** An endpoint's concurrency on this sender instance, learnt from its answers (`UrlConcurrency`). */
export interface EndpointConcurrency {
  limit: number;
  /** False while it has not been answered here: `limit` is where it starts. */
  learnt: boolean;
  min: number;
  max: number;
}

function concurrencyRow(c: EndpointConcurrency | undefined): Html | string {
  if (!c) return '';
  const how = c.learnt ? 'learnt from its answers' : 'where it starts, until it answers';
  return html`
<dt>Concurrency</dt><dd id="endpoint-concurrency">${c.limit} at once <span class="muted">(${how}; from ${c.min} to ${c.max}: it grows while answers are fast and halves at a failure or a slow answer)</span></dd>`;
}

/** One endpoint: its status and warnings, filter, scheme and secret, charts, and its actions. */
export function endpointPage(
  context: PageContext,
  data: {
    endpoint: EndpointView;
    secrets: EndpointSecretView[];
    charts: ChartData[];
    notice?: string | undefined;
    error?: ApiErrorView | undefined;
    recover?: { since?: string; until?: string };
    concurrency?: EndpointConcurrency;
  },
): Html {
  const e = data.endpoint;
  const base = `/dashboard/endpoints/${e.id}`;
  const content = html`<p><a href="/dashboard/endpoints">← Endpoints</a></p>
<h1 class="url">${e.url}</h1>${notice(data.notice)}${apiErrorBox(data.error)}
<div id="endpoint-state" data-live-region>
<p>${endpointStatus(e)}${e.description ? html` · ${e.description}` : ''}</p>
${failureBox(e)}
</div>
<form class="row" method="post" action="${base}/status">${csrfField(context)}${
    e.status === 'enabled'
      ? html`<input type="hidden" name="status" value="disabled"><button type="submit" class="danger">Disable</button><span class="muted">Nothing is sent while disabled; pending deliveries are kept.</span>`
      : html`<input type="hidden" name="status" value="enabled"><button type="submit" class="primary">Enable</button><span class="muted">Its kept deliveries resume, each with a fresh 48 hours; events made while it was disabled are sent only by Recover.</span>`
  }</form>
<dl><dt>Endpoint id</dt><dd class="mono">${e.id}</dd><dt>Events</dt><dd>${eventsOf(e.enabled_events)}</dd>
<dt>Signature</dt><dd>${scheme(e.signature_scheme)}${e.secret_scope === 'account' ? ' · the business secrets' : ''}</dd>
<dt>Rate limit</dt><dd>${e.rate_limit_per_second === null ? 'none' : `${e.rate_limit_per_second} per second`}</dd>${concurrencyRow(data.concurrency)}
<dt>Created</dt><dd>${when(e.created_at)}</dd></dl>
<h2>Attempts</h2>
<div id="endpoint-charts" class="charts" data-live-region>${data.charts.map(
    (c, i) =>
      html`<figure>${responsiveChart(c, `chart-${i}`)}<figcaption>${chartSummary(c).text}</figcaption></figure>`,
  )}</div>
<p class="muted legend"><span class="key ok"></span> answered 200 <span class="key fail"></span> failed <span class="key line"></span> median latency</p>
<h2 id="recover-title">Recover failed deliveries</h2>
<form class="row" method="post" action="${base}/recover" aria-labelledby="recover-title">${csrfField(context)}
  <label>Events since (UTC) <input type="datetime-local" name="since" required step="1" value="${data.recover?.since ?? ''}"></label>
  <label>Until (UTC, optional) <input type="datetime-local" name="until" step="1" value="${data.recover?.until ?? ''}"></label>
  <button type="submit">Recover</button>
  <span class="muted">At most 14 days back. Failed and never-attempted deliveries are sent again with a fresh 48 hours; a delivered event never is.</span>
</form>
<h2 id="secret-title">${e.signature_scheme === 'v1a' ? 'Public keys' : 'Signing secrets'}</h2>
<p class="muted">${e.signature_scheme === 'v1a' ? 'Receivers verify the v1a signatures with these (signingPublicKeys); the secret key never leaves the sender.' : 'Receivers verify the webhook-signature header with these (signingSecrets).'}</p>
${secretsTable(data.secrets, 'secret-title')}
${
  e.secret_scope === 'endpoint'
    ? html`<form class="row" method="post" action="${base}/rotate-secret">${csrfField(context)}
  <label>Keep the previous one for ${overlapSelect()}</label>
  <button type="submit">Rotate</button></form>`
    : html`<p class="muted">Rotated with the business secrets, on the <a href="/dashboard/endpoints">endpoints page</a>.</p>`
}
<h2>Remove</h2>
<form class="row" method="post" action="${base}/delete">${csrfField(context)}
  <button type="submit" class="danger">Remove this endpoint</button><span class="muted">Its pending deliveries end; past ones stay under their events.</span></form>`;
  return page(context, { title: e.url, live: { url: e.url, log: true } }, content);
}
