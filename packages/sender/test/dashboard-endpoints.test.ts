// @module-tag pglite
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type DashboardSender,
  getPage,
  postForm,
  signIn,
  startDashboardSender,
} from './fixtures/dashboard.js';
import { sessionRequest } from './fixtures/requests.js';

let sender: DashboardSender;
let base: string;

const api = async <T = unknown>(key: string, method: string, path: string, body?: unknown) => {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, body: (await response.json()) as { data: T } };
};

beforeAll(async () => {
  sender = await startDashboardSender();
  base = sender.url;
}, 60_000);
afterAll(() => sender?.close());

describe("the dashboard's endpoint pages", { timeout: 60_000 }, () => {
  it('adds an endpoint with a filter and a scheme from the form; its page shows them, its public key, status and charts', async () => {
    const cookie = await signIn(base, sender.keys.test);
    const { csrf } = await getPage(base, '/dashboard/endpoints', cookie);
    const added = await postForm(base, '/dashboard/endpoints', cookie, {
      _csrf: csrf as string,
      url: sender.webhookUrl,
      description: 'Orders <service>',
      'event:payment.session.succeeded': 'on',
      'event:payment.session.failed': 'on',
      signature_scheme: 'v1a',
    });
    expect(added.status).toBe(303);
    const [endpoint] = (
      await api<{ id: string; enabled_events: string[]; signature_scheme: string }[]>(
        sender.keys.test,
        'GET',
        '/webhook-endpoints',
      )
    ).body.data;
    expect(endpoint).toMatchObject({
      enabled_events: ['payment.session.succeeded', 'payment.session.failed'],
      signature_scheme: 'v1a',
    });
    const list = await getPage(base, '/dashboard/endpoints', cookie);
    expect(list.html).toContain(`href="/dashboard/endpoints/${endpoint?.id}"`);
    expect(list.html).toContain('Orders &lt;service&gt;');

    const page = await getPage(base, `/dashboard/endpoints/${endpoint?.id}`, cookie);
    expect(page.status).toBe(200);
    expect(page.headers.get('cache-control')).toBe('no-store');
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(page.html).toContain('<code>payment.session.succeeded</code>');
    expect(page.html).toContain('v1a (Ed25519)');
    expect(page.html).toContain('✓ enabled');
    // The public key only: the secret key never leaves the sender.
    expect(page.html).toMatch(/whpk_/);
    expect(page.html).not.toMatch(/whsk_/);
    // Two server-rendered charts, no inline script or style.
    // Two charts, each drawn wide and narrow (the style sheet shows the one that fits).
    expect(page.html.match(/<svg class="chart wide"/g)).toHaveLength(2);
    expect(page.html.match(/<svg class="chart narrow"/g)).toHaveLength(2);
    expect(page.html).toContain('Last 24 hours: no attempt.');
    expect(page.html).not.toMatch(/<script>|style="/);
    expect(page.html).toContain('<link rel="icon" href="/favicon.ico"');
  });

  it('disables and enables with the form, recovers a window, and refuses a forged form or a bad window', async () => {
    const cookie = await signIn(base, sender.keys.test);
    const created = await api<{ id: string }>(sender.keys.test, 'POST', '/webhook-endpoints', {
      url: `${sender.webhookUrl}?second`,
    });
    const id = created.body.data.id;
    const { csrf } = await getPage(base, `/dashboard/endpoints/${id}`, cookie);

    const forged = await postForm(base, `/dashboard/endpoints/${id}/status`, cookie, { status: 'disabled' });
    expect(forged.status).toBe(403);
    const disabled = await postForm(base, `/dashboard/endpoints/${id}/status`, cookie, {
      _csrf: csrf as string,
      status: 'disabled',
    });
    expect(disabled.headers.get('location')).toBe(`/dashboard/endpoints/${id}?notice=endpoint_disabled`);
    const shown = await getPage(base, `/dashboard/endpoints/${id}?notice=endpoint_disabled`, cookie);
    expect(shown.html).toContain('⏸ disabled');
    expect(shown.html).toContain('its pending deliveries are kept');
    expect(shown.html).toContain('>Enable</button>');

    // An event while disabled, recovered (held until enabled), then enabled: it is delivered.
    const received = sender.received();
    await api(sender.keys.test, 'POST', '/payment-sessions', sessionRequest);
    const since = new Date(Date.now() - 60_000).toISOString().slice(0, 19);
    const recovered = await postForm(base, `/dashboard/endpoints/${id}/recover`, cookie, {
      _csrf: csrf as string,
      since,
    });
    expect(recovered.headers.get('location')).toMatch(
      new RegExp(`^/dashboard/endpoints/${id}\\?notice=recovered&count=[1-9]`),
    );
    const enabled = await postForm(base, `/dashboard/endpoints/${id}/status`, cookie, {
      _csrf: csrf as string,
      status: 'enabled',
    });
    expect(enabled.headers.get('location')).toBe(`/dashboard/endpoints/${id}?notice=endpoint_enabled`);
    await expect.poll(() => sender.received(), { timeout: 20_000 }).toBeGreaterThan(received);

    const tooOld = await postForm(base, `/dashboard/endpoints/${id}/recover`, cookie, {
      _csrf: csrf as string,
      since: '2020-01-01T00:00:00',
    });
    expect(tooOld.status).toBe(422);
    const text = await tooOld.text();
    expect(text).toContain('must be at most 14 days ago');
    expect(text).toContain('value="2020-01-01T00:00:00"');
  });

  it("shows another business's endpoint as not found, and its actions change nothing", async () => {
    const created = await api<{ id: string }>(sender.keys.test, 'POST', '/webhook-endpoints', {
      url: `${sender.webhookUrl}?third`,
    });
    const id = created.body.data.id;
    const cookie = await signIn(base, sender.keys.other);
    const { csrf } = await getPage(base, '/dashboard/endpoints', cookie);
    expect((await getPage(base, `/dashboard/endpoints/${id}`, cookie)).status).toBe(404);
    for (const [path, fields] of [
      ['status', { status: 'disabled' }],
      ['recover', { since: new Date(Date.now() - 60_000).toISOString().slice(0, 19) }],
      ['rotate-secret', { overlap_seconds: '0' }],
      ['delete', {}],
    ] as const) {
      const answer = await postForm(base, `/dashboard/endpoints/${id}/${path}`, cookie, {
        _csrf: csrf as string,
        ...fields,
      });
      expect(answer.status, path).toBe(404);
    }
    const still = await api<{ status: string }>(sender.keys.test, 'GET', `/webhook-endpoints/${id}`);
    expect(still.body.data.status).toBe('enabled');
  });

  it("shows each endpoint's concurrency on its page and on /metrics: where it starts, then learnt from its answers", async () => {
    // The other business: its endpoint alone gets its session's event.
    const key = sender.keys.other;
    const created = await api<{ id: string }>(key, 'POST', '/webhook-endpoints', {
      url: `${sender.webhookUrl}?concurrency`,
    });
    expect(created.status).toBe(201);
    const id = created.body.data.id;
    const cookie = await signIn(base, key);
    const before = await getPage(base, `/dashboard/endpoints/${id}`, cookie);
    expect(before.html).toMatch(/id="endpoint-concurrency">4 at once <span class="muted">\(where it starts/);

    expect((await api(key, 'POST', '/payment-sessions', sessionRequest)).status).toBe(201);
    const line = new RegExp(`^payhook_endpoint_concurrency\\{endpoint="${id}"\\} (\\d+)$`, 'm');
    await expect
      .poll(async () => line.exec(await (await fetch(`${base}/metrics`)).text())?.[1], { timeout: 20_000 })
      .toBe('4');
    const after = await getPage(base, `/dashboard/endpoints/${id}`, cookie);
    expect(after.html).toMatch(
      /id="endpoint-concurrency">4 at once <span class="muted">\(learnt from its answers/,
    );
  });
});
