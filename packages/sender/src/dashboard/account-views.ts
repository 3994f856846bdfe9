import type { Static } from 'typebox';
import type { SigningSecret } from '../http/signing-secrets.js';
import type { Health } from '../http/webhook-health.js';
import { type Html, html } from './html.js';
import { apiErrorBox, csrfField, document, notice, type PageContext, page, when } from './layout.js';

/** A URL's health as `GET /accounts/webhook-health` answers it (the API's own schema). */
export type UrlHealth = Static<typeof Health>;

/** A signing secret as `GET /accounts/signing-secrets` answers it (the API's own schema). */
export type SecretView = Static<typeof SigningSecret>;

type ApiErrorView = { message: string; details?: { field: string; message: string }[] };

/** A payment as `GET /payments` answers it (the part shown). */
export interface PaymentView {
  status: string;
  expires_at: string;
  payment: {
    id: string;
    reference: string;
    amount: number;
    currency: string;
    status: string;
    date: string;
    description: string;
  };
}

/** A payment's status as words and a symbol. */
function paymentStatus(status: string): Html {
  const look = status === 'pending' ? 'pending' : status === 'failed' ? 'failed' : 'delivered';
  const symbol = { pending: '…', failed: '✗', delivered: '✓' }[look];
  return html`<span class="status ${look}">${symbol} ${status}</span>`;
}

/** The sandbox's payments (test mode): sessions, and completing or failing one. */
export function paymentsPage(
  context: PageContext,
  data: {
    payments: PaymentView[];
    pagination: { after: string; before: string };
    notice?: string | undefined;
    error?: ApiErrorView | undefined;
  },
): Html {
  if (context.principal.mode !== 'test') {
    return page(
      context,
      { title: 'Payments' },
      html`<h1>Payments</h1><p>The sandbox's payments are for test mode: sign in with a test key (<code>sk_test_…</code>) to make and complete test payments.</p>`,
    );
  }
  const content = html`<h1>Payments (test mode)</h1>${notice(data.notice)}${apiErrorBox(data.error)}
<h2 id="new-title">New test payment session</h2>
<form class="row" method="post" action="/dashboard/payments" aria-labelledby="new-title">${csrfField(context)}
  <label>Amount (smallest unit) <input type="number" name="amount" min="1" value="150000" required></label>
  <label>Description <input type="text" name="description" value="Test order" maxlength="200" required></label>
  <button type="submit" class="primary">Create session (NGN, bank transfer)</button>
</form>
<div id="payments" class="table-wrap" data-live-region>
<table class="stack"><caption>Newest first</caption>
<thead><tr><th scope="col">Created</th><th scope="col">Payment</th><th scope="col">Amount</th><th scope="col">Status</th><th scope="col">Sandbox</th></tr></thead>
<tbody>${data.payments.map(
    (
      p,
    ) => html`<tr><td data-label="Created">${when(p.payment.date)}</td><td data-label="Payment" class="mono">${p.payment.id}<br><span class="muted">${p.payment.description}</span></td>
<td data-label="Amount">${(p.payment.amount / 100).toFixed(2)} ${p.payment.currency}</td><td data-label="Status">${paymentStatus(p.payment.status)}</td>
<td data-label="Sandbox">${
      p.payment.status === 'pending'
        ? html`<form class="inline" method="post" action="/dashboard/payments/${p.payment.id}/complete">${csrfField(context)}<input type="hidden" name="outcome" value="succeeded"><button type="submit" aria-label="Complete payment ${p.payment.id}">Complete</button></form>
<form class="inline" method="post" action="/dashboard/payments/${p.payment.id}/complete">${csrfField(context)}<input type="hidden" name="outcome" value="failed"><button type="submit" class="danger" aria-label="Fail payment ${p.payment.id}">Fail</button></form>`
        : html`<span class="muted">done</span>`
    }</td></tr>`,
  )}</tbody></table>
</div>
<nav class="pager" aria-label="Pages">${
    data.pagination.before
      ? html`<a href="/dashboard/payments?before=${data.pagination.before}" rel="prev">← Newer</a>`
      : ''
  }${data.pagination.after ? html`<a href="/dashboard/payments?after=${data.pagination.after}" rel="next">Older →</a>` : ''}</nav>`;
  return page(context, { title: 'Payments', live: {} }, content);
}

/** The sign-in page: an API key, which is not kept (a session cookie is). */
export function signInPage(options: { error?: string; status?: number } = {}): Html {
  return document(
    'Sign in',
    html`<main id="main" class="card"><h1>Sign in to the payhook dashboard</h1>
${options.error ? html`<p class="error" role="alert">${options.error}</p>` : ''}
<form method="post" action="/dashboard/sign-in">
  <label>API key <input type="password" name="api_key" required autocomplete="off" autofocus placeholder="sk_test_…"></label>
  <p class="muted">The key is checked and not kept: a session cookie signs you in for 8 hours. A test key shows test data, a live key live data.</p>
  <button type="submit" class="primary">Sign in</button>
</form></main>`,
  );
}

/** An error page (a missing event, a refused form). */
export function errorPage(
  status: number,
  title: string,
  message: string,
  signedIn: boolean,
  details: readonly { field: string; message: string }[] = [],
): Html {
  return document(
    title,
    html`<main id="main" class="card"><h1>${title}</h1><p role="alert">${message}</p>${
      details.length > 0
        ? html`<ul>${details.map((d) => html`<li><code>${d.field}</code>: ${d.message}</li>`)}</ul>`
        : ''
    }<p class="muted">HTTP ${status}</p>
<p><a href="${signedIn ? '/dashboard/events' : '/dashboard/sign-in'}">${signedIn ? 'Back to the events' : 'Sign in'}</a></p></main>`,
  );
}

/** The page of every dashboard request while the sender's database is away (503). */
export function databaseUnavailablePage(): Html {
  return document(
    'Database unavailable',
    html`<main id="main" class="card"><h1>The database is unavailable</h1><p role="alert">The sender cannot reach its database right now, so this page cannot be shown. Nothing was changed. Deliveries wait in the database and go on by themselves once it is back.</p>
<p class="muted">HTTP 503</p><p><a href="">Try again</a></p></main>`,
  );
}
