// @module-tag pglite
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DashboardSender, getPage, signIn, startDashboardSender } from './fixtures/dashboard.js';
import { sessionRequest } from './fixtures/requests.js';

/*
 * Every dashboard form, posted with each value outside its documented set: a choice in another
 * case, a number with trailing text, a broken escape, a field missing, given twice or unknown.
 * Each is a 4xx page, and the API reads everything back as it was.
 */

let sender: DashboardSender;
let base: string;

const api = async <T = unknown>(method: string, path: string, body?: unknown) => {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${sender.keys.test}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, data: ((await response.json()) as { data: T }).data };
};

/** Posts `body` as it is (no encoding of ours), as a page of the dashboard would (same origin). */
const postRaw = (path: string, cookie: string, body: string) =>
  fetch(`${base}${path}`, {
    method: 'POST',
    headers: { cookie, origin: base, 'content-type': 'application/x-www-form-urlencoded' },
    body,
    redirect: 'manual',
  });

/** A form's valid fields (the required ones), and the garbled values of each field (written as they go on the wire). */
interface FormCase {
  path: string;
  valid: Record<string, string>;
  garbled: Record<string, string[]>;
}

/** The bodies a garbled form is posted as: each wrong value, each field left out or given twice, a field it does not have. */
function garbledBodies({ valid, garbled }: FormCase): string[] {
  const encode = (fields: Record<string, string>) =>
    Object.entries(fields)
      .map(([name, value]) => `${encodeURIComponent(name)}=${value}`)
      .join('&');
  const bodies: string[] = [];
  for (const [name, values] of Object.entries(garbled)) {
    for (const value of values) bodies.push(encode({ ...valid, [name]: value }));
    const { [name]: _left, ...rest } = valid;
    if (name in valid) {
      bodies.push(encode(rest));
      bodies.push(`${encode(valid)}&${encodeURIComponent(name)}=${valid[name]}`);
    }
  }
  bodies.push(`${encode(valid)}&surprise=1`, `${encode(valid)}&surprise=%ZZ`);
  return bodies;
}

beforeAll(async () => {
  sender = await startDashboardSender();
  base = sender.url;
}, 60_000);
afterAll(() => sender?.close());

describe("the dashboard's forms refuse every value they do not offer, and change nothing", {
  timeout: 120_000,
}, () => {
  it('on every endpoint, event and payment form: 4xx, and the API reads back the same endpoints, secrets and payments', async () => {
    const cookie = await signIn(base, sender.keys.test);
    const endpoint = await api<{ id: string }>('POST', '/webhook-endpoints', { url: sender.webhookUrl });
    expect(endpoint.status).toBe(201);
    const id = endpoint.data.id;
    const session = await api<{ payment: { id: string } }>('POST', '/payment-sessions', sessionRequest);
    expect(session.status).toBe(201);
    const paymentId = session.data.payment.id;
    const [event] = (await api<{ id: string }[]>('GET', `/events?payment_id=${paymentId}`)).data;
    const { csrf } = await getPage(base, `/dashboard/endpoints/${id}`, cookie);
    const since = new Date(Date.now() - 60_000).toISOString().slice(0, 19);

    /** What the forms could change, read through the API. */
    const state = async () => ({
      endpoints: (await api('GET', '/webhook-endpoints')).data,
      endpointSecrets: (await api('GET', `/webhook-endpoints/${id}/signing-secrets`)).data,
      businessSecrets: (await api('GET', '/accounts/signing-secrets')).data,
      payments: (await api('GET', '/payments')).data,
      deliveries: (await api<{ deliveries: unknown[] }>('GET', `/events/${event?.id}`)).data.deliveries
        .length,
    });
    const before = await state();

    const cases: FormCase[] = [
      {
        path: `/dashboard/endpoints/${id}/status`,
        valid: { status: 'disabled' },
        garbled: { status: ['Enabled', 'Disabled', '%ZZ', 'disabled%20', 'on', ''] },
      },
      {
        path: `/dashboard/endpoints/${id}/rotate-secret`,
        valid: { overlap_seconds: '3600' },
        garbled: { overlap_seconds: ['3600abc', '3600.0', '36e2', '+3600', '%ZZ', '-1', ''] },
      },
      {
        path: '/dashboard/endpoints/rotate-secret',
        valid: { overlap_seconds: '3600' },
        garbled: { overlap_seconds: ['3600abc', '0x10', '%ZZ', ''] },
      },
      {
        path: `/dashboard/endpoints/${id}/recover`,
        valid: { since },
        garbled: { since: ['%ZZ', 'yesterday'] },
      },
      { path: `/dashboard/endpoints/${id}/delete`, valid: {}, garbled: {} },
      {
        path: '/dashboard/endpoints',
        valid: { url: encodeURIComponent(`${sender.webhookUrl}?added`), signature_scheme: 'v1a' },
        garbled: { signature_scheme: ['V1A', 'v2', '%ZZ'], 'event:*': ['yes', 'off'], url: ['%ZZ'] },
      },
      { path: '/dashboard/events/redeliver', valid: { since }, garbled: { since: ['%ZZ'] } },
      { path: `/dashboard/events/${event?.id}/redeliver`, valid: {}, garbled: {} },
      {
        path: '/dashboard/payments',
        valid: { amount: '150000' },
        garbled: { amount: ['150000abc', '150000.5', '1.5e5', '%ZZ', ''], description: ['%ZZ'] },
      },
      {
        path: `/dashboard/payments/${paymentId}/complete`,
        valid: { outcome: 'failed' },
        garbled: { outcome: ['Failed', 'succeeded%00', '%ZZ', 'SUCCEEDED'] },
      },
    ];
    let posted = 0;
    for (const form of cases) {
      for (const body of garbledBodies(form)) {
        const answer = await postRaw(form.path, cookie, `_csrf=${csrf}&${body}`);
        const page = await answer.text();
        expect(answer.status, `${form.path} ${body}`).toBeGreaterThanOrEqual(400);
        expect(answer.status, `${form.path} ${body}`).toBeLessThan(500);
        expect(answer.headers.get('content-type'), form.path).toMatch(/^text\/html/);
        expect(page, `${form.path} ${body}`).toMatch(/role="alert"/);
        posted++;
      }
    }
    expect(posted).toBeGreaterThan(60);
    expect(await state()).toEqual(before);
  });

  it('answers an events filter it does not offer (a type the sender does not make, a status it does not know) with a 400 page naming the field, not an empty list', async () => {
    const cookie = await signIn(base, sender.keys.test);
    for (const [query, field] of [
      ['type=Foo', 'type'],
      ['type=Payment.Session.Created', 'type'],
      ['type=payment.session.created%20', 'type'],
      ['type=Foo&delivery_status=failed', 'type'],
      ['delivery_status=Failed', 'delivery_status'],
    ] as const) {
      const page = await getPage(base, `/dashboard/events?${query}`, cookie);
      expect(page.status, query).toBe(400);
      expect(page.headers.get('content-type'), query).toMatch(/^text\/html/);
      expect(page.html, query).toMatch(/role="alert"/);
      expect(page.html, query).toContain(`<code>${field}</code>:`);
    }
    expect((await getPage(base, '/dashboard/events?type=Foo', cookie)).html).toContain(
      '<code>type</code>: must be one of payment.session.created,',
    );
    for (const query of ['type=payment.session.created', 'type=', 'type=&delivery_status=none']) {
      expect((await getPage(base, `/dashboard/events?${query}`, cookie)).status, query).toBe(200);
    }
  });

  it('answers a broken escape with 400 and says so; a choice in another case with 422 naming the field and its values', async () => {
    const cookie = await signIn(base, sender.keys.test);
    const created = await api<{ id: string }>('POST', '/webhook-endpoints', {
      url: `${sender.webhookUrl}?two`,
    });
    const id = created.data.id;
    const { csrf } = await getPage(base, `/dashboard/endpoints/${id}`, cookie);

    const broken = await postRaw(`/dashboard/endpoints/${id}/status`, cookie, `_csrf=${csrf}&status=%ZZ`);
    expect(broken.status).toBe(400);
    expect(await broken.text()).toContain('encoding is broken in the field status');

    const cased = await postRaw(`/dashboard/endpoints/${id}/status`, cookie, `_csrf=${csrf}&status=Enabled`);
    expect(cased.status).toBe(422);
    const text = await cased.text();
    expect(text).toContain('<code>status</code>: must be one of enabled, disabled');
    expect(text).toContain('nothing was changed');

    const overlap = await postRaw(
      `/dashboard/endpoints/${id}/rotate-secret`,
      cookie,
      `_csrf=${csrf}&overlap_seconds=3600abc`,
    );
    expect(overlap.status).toBe(422);
    expect(await overlap.text()).toMatch(
      /<code>overlap_seconds<\/code>: must be a whole number from 0 to \d+/,
    );
    expect((await api<{ status: string }>('GET', `/webhook-endpoints/${id}`)).data.status).toBe('enabled');

    // The same values sent to the API are refused there too: the two read the field alike.
    for (const status of ['Enabled', '%ZZ']) {
      expect((await api('PATCH', `/webhook-endpoints/${id}`, { status })).status).toBe(422);
    }
    const rotated = await api('POST', `/webhook-endpoints/${id}/signing-secrets/rotate`, {
      overlap_seconds: '3600abc',
    });
    expect(rotated.status).toBe(422);
  });
});
