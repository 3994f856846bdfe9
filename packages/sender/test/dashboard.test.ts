// @module-tag pglite
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeApiKey } from '../src/index.js';
import {
  BUSINESS,
  type DashboardSender,
  getPage,
  OTHER_BUSINESS,
  postForm,
  signIn,
  startDashboardSender,
} from './fixtures/dashboard.js';
import { sessionRequest } from './fixtures/requests.js';

let sender: DashboardSender;
let base: string;

interface ApiEvent {
  id: string;
  type: string;
  payment_id: string | null;
  deliveries: { attempts: unknown[] }[];
}

/** Calls the JSON API with `key`. */
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

/** A payment session of the test business, whose `payment.session.created` event is returned. */
async function makeEvent(description = 'Order 1'): Promise<string> {
  const created = await api<{ payment: { id: string } }>(sender.keys.test, 'POST', '/payment-sessions', {
    ...sessionRequest,
    description,
  });
  expect(created.status).toBe(201);
  const listed = await api<ApiEvent[]>(
    sender.keys.test,
    'GET',
    `/events?payment_id=${created.body.data.payment.id}`,
  );
  return listed.body.data[0]?.id as string;
}

/** Waits until the event's deliveries have `n` attempts in all. */
async function attemptsOf(eventId: string, n: number) {
  let event: ApiEvent | undefined;
  await expect
    .poll(
      async () => {
        event = (await api<ApiEvent>(sender.keys.test, 'GET', `/events/${eventId}`)).body.data;
        return event.deliveries.reduce((sum, d) => sum + d.attempts.length, 0);
      },
      { timeout: 20_000 },
    )
    .toBeGreaterThanOrEqual(n);
  return event;
}

beforeAll(async () => {
  sender = await startDashboardSender();
  base = sender.url;
  expect(
    (await api(sender.keys.test, 'PATCH', '/accounts/settings', { webhook_urls: [sender.webhookUrl] }))
      .status,
  ).toBe(200);
}, 60_000);
afterAll(() => sender?.close());

describe('the dashboard: sign-in and sessions', () => {
  it('signs in with an API key into an HttpOnly, SameSite=Strict cookie with an expiry; a wrong key is refused', async () => {
    const page = await fetch(`${base}/dashboard/events`, { redirect: 'manual' });
    expect(page.status).toBe(303);
    expect(page.headers.get('location')).toBe('/dashboard/sign-in');

    const signInForm = await fetch(`${base}/dashboard/sign-in`);
    expect(signInForm.status).toBe(200);
    expect(await signInForm.text()).toContain('<label>API key <input type="password" name="api_key"');
    const csp = signInForm.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");

    const wrong = await postForm(base, '/dashboard/sign-in', '', { api_key: 'sk_test_not_a_key' });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('set-cookie')).toBeNull();
    expect(await wrong.text()).toContain('That API key is not valid here');

    const right = await postForm(base, '/dashboard/sign-in', '', { api_key: sender.keys.test });
    expect(right.status).toBe(303);
    const cookie = right.headers.get('set-cookie') ?? '';
    expect(cookie).toMatch(
      /^payhook_session=[\w-]{43}; Path=\/dashboard; HttpOnly; SameSite=Strict; Max-Age=28800$/,
    );
    const events = await getPage(base, '/dashboard/events', cookie.split(';')[0] as string);
    expect(events.status).toBe(200);
    expect(events.html).toContain(`Business <code>${BUSINESS}</code>`);
    expect(events.html).toContain('Test mode');
    // The key itself is never on a page, in a cookie or stored.
    expect(events.html).not.toContain(sender.keys.test);
    const stored = await sender.service.database.db.selectFrom('dashboard_sessions').selectAll().execute();
    expect(JSON.stringify(stored)).not.toContain(sender.keys.test);
  });

  it('signs out only with the form token, and the session is gone afterwards', async () => {
    const cookie = await signIn(base, sender.keys.test);
    const { csrf } = await getPage(base, '/dashboard/events', cookie);
    expect((await postForm(base, '/dashboard/sign-out', cookie, {})).status).toBe(403);
    expect((await getPage(base, '/dashboard/events', cookie)).status).toBe(200);
    const out = await postForm(base, '/dashboard/sign-out', cookie, { _csrf: csrf as string });
    expect(out.status).toBe(303);
    expect(out.headers.get('set-cookie')).toContain('Max-Age=0');
    expect((await getPage(base, '/dashboard/events', cookie)).status).toBe(303);
  });

  it('ends the sessions of a revoked key', async () => {
    const { createApiKey } = await import('../src/index.js');
    const key = await createApiKey(sender.service.database.db, { businessId: BUSINESS, mode: 'test' });
    const cookie = await signIn(base, key);
    expect((await getPage(base, '/dashboard/events', cookie)).status).toBe(200);
    await revokeApiKey(sender.service.database.db, key);
    expect((await getPage(base, '/dashboard/events', cookie)).status).toBe(303);
  });

  it('refuses a request from outside that claims the in-process caller header', async () => {
    const forged = await fetch(`${base}/events`, {
      headers: { 'x-payhook-act-as': `forged test ${BUSINESS}` },
    });
    expect(forged.status).toBe(401);
  });
});

describe('the dashboard: what a business sees and does', () => {
  it('shows a business its own events only, test and live apart: another business or mode gets 404', async () => {
    const eventId = await makeEvent();
    const own = await signIn(base, sender.keys.test);
    expect((await getPage(base, '/dashboard/events', own)).html).toContain(`/dashboard/events/${eventId}`);
    const page = await getPage(base, `/dashboard/events/${eventId}`, own);
    expect(page.status).toBe(200);
    expect(page.html).toContain('payment.session.created');

    for (const key of [sender.keys.other, sender.keys.live]) {
      const cookie = await signIn(base, key);
      const list = await getPage(base, '/dashboard/events', cookie);
      expect(list.html).not.toContain(eventId);
      const foreign = await getPage(base, `/dashboard/events/${eventId}`, cookie);
      expect(foreign.status).toBe(404);
      expect(foreign.html).toContain('Not found');
    }
  });

  it('refuses a form posted without the CSRF token, with a wrong one, or from another origin', async () => {
    const eventId = await makeEvent();
    const cookie = await signIn(base, sender.keys.test);
    const { csrf } = await getPage(base, `/dashboard/events/${eventId}`, cookie);
    expect(csrf).toMatch(/^[\w-]{32}$/);
    const path = `/dashboard/events/${eventId}/redeliver`;
    expect((await postForm(base, path, cookie, {})).status).toBe(403);
    expect((await postForm(base, path, cookie, { _csrf: `${csrf?.slice(1)}x` })).status).toBe(403);
    const foreign = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: {
        cookie,
        origin: 'https://attacker.example',
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({ _csrf: csrf as string }),
      redirect: 'manual',
    });
    expect(foreign.status).toBe(403);
    const before = (await api<ApiEvent>(sender.keys.test, 'GET', `/events/${eventId}`)).body.data.deliveries
      .length;
    expect(before).toBe(1);
    const done = await postForm(base, path, cookie, { _csrf: csrf as string });
    expect(done.status).toBe(303);
    expect(done.headers.get('location')).toBe(`/dashboard/events/${eventId}?notice=redelivered`);
    expect(
      (await api<ApiEvent>(sender.keys.test, 'GET', `/events/${eventId}`)).body.data.deliveries.length,
    ).toBe(2);
  });

  it('shows each attempt with its status, latency and response, and a redelivery turns a 500 into a 200', async () => {
    sender.answer(500);
    const eventId = await makeEvent();
    await attemptsOf(eventId, 1);
    const cookie = await signIn(base, sender.keys.test);
    const failed = await getPage(base, `/dashboard/events/${eventId}`, cookie);
    expect(failed.html).toContain('✗ HTTP 500');
    expect(failed.html).toContain('receiver broke');
    expect(failed.html).toContain('next attempt');
    sender.answer(200);
    await postForm(base, `/dashboard/events/${eventId}/redeliver`, cookie, { _csrf: failed.csrf as string });
    await attemptsOf(eventId, 2);
    const delivered = await getPage(base, `/dashboard/events/${eventId}`, cookie);
    expect(delivered.html).toContain('✓ HTTP 200');
  });

  it('escapes what events carry: a description with markup is text', async () => {
    const eventId = await makeEvent('<script>alert(1)</script><img src=x onerror=alert(2)>');
    const cookie = await signIn(base, sender.keys.test);
    const { html } = await getPage(base, `/dashboard/events/${eventId}`, cookie);
    expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(html).not.toContain('<script>alert');
    expect(html).not.toContain('<img src=x');
  });

  it('takes forms only: a JSON body with the right token and fields of other types is 415, not a crash', async () => {
    const cookie = await signIn(base, sender.keys.test);
    const { csrf } = await getPage(base, '/dashboard/endpoints', cookie);
    const response = await fetch(`${base}/dashboard/endpoints`, {
      method: 'POST',
      headers: { cookie, origin: base, 'content-type': 'application/json' },
      body: JSON.stringify({ _csrf: csrf, url: 5 }),
      redirect: 'manual',
    });
    expect(response.status).toBe(415);
    expect(response.headers.get('content-type')).toContain('text/html');
    expect(await response.text()).toContain('role="alert"');
  });

  it('adds a public URL, refuses a private one with the rule and its switch, and removes an endpoint', async () => {
    const cookie = await signIn(base, sender.keys.other);
    const { csrf } = await getPage(base, '/dashboard/endpoints', cookie);
    const refused = await postForm(base, '/dashboard/endpoints', cookie, {
      _csrf: csrf as string,
      url: 'http://127.0.0.1:9/webhooks',
      'event:*': 'on',
      signature_scheme: 'v1',
    });
    expect(refused.status).toBe(422);
    const text = await refused.text();
    expect(text).toContain('The webhook URL cannot receive events.');
    expect(text).toMatch(/private|loopback/i);
    expect(text).toContain('value="http://127.0.0.1:9/webhooks"');

    const added = await postForm(base, '/dashboard/endpoints', cookie, {
      _csrf: csrf as string,
      url: sender.webhookUrl,
      'event:*': 'on',
      signature_scheme: 'v1',
    });
    expect(added.headers.get('location')).toBe('/dashboard/endpoints?notice=url_added');
    const listed = await getPage(base, '/dashboard/endpoints', cookie);
    expect(listed.html).toContain(sender.webhookUrl);
    expect(listed.html).toContain('whsec_');
    const [endpoint] = (await api<{ id: string }[]>(sender.keys.other, 'GET', '/webhook-endpoints')).body
      .data;
    const removed = await postForm(base, `/dashboard/endpoints/${endpoint?.id}/delete`, cookie, {
      _csrf: csrf as string,
    });
    expect(removed.headers.get('location')).toBe('/dashboard/endpoints?notice=url_removed');
    expect(
      (await api<{ webhook_urls: string[] }>(sender.keys.other, 'GET', '/accounts/settings')).body.data
        .webhook_urls,
    ).toEqual([]);
  });

  it("reports each URL's health over 24 hours: success rate, median latency, last error, pending", async () => {
    const health = await api<Record<string, unknown>[]>(sender.keys.test, 'GET', '/accounts/webhook-health');
    expect(health.status).toBe(200);
    const row = health.body.data[0] ?? {};
    expect(health.body.data).toHaveLength(1);
    expect(row.url).toBe(sender.webhookUrl);
    expect(row.attempts).toBeGreaterThan(0);
    expect(row.success_rate).toBeGreaterThan(0);
    expect(row.success_rate).toBeLessThan(1);
    expect(row.p50_latency_ms).toBeGreaterThanOrEqual(0);
    expect(row.last_error).toMatchObject({ status_code: 500, code: expect.any(String) });
    expect(row.pending).toBeGreaterThanOrEqual(1);
  });

  it('makes, completes and fails sandbox payments from the payments page (test mode only)', async () => {
    const cookie = await signIn(base, sender.keys.test);
    const { csrf } = await getPage(base, '/dashboard/payments', cookie);
    for (let i = 0; i < 2; i++) {
      const made = await postForm(base, '/dashboard/payments', cookie, {
        _csrf: csrf as string,
        amount: '150000',
        description: 'Dashboard order',
      });
      expect(made.status, await made.text()).toBe(303);
      expect(made.headers.get('location')).toBe('/dashboard/payments?notice=payment_created');
    }
    const page = await getPage(base, '/dashboard/payments', cookie);
    const ids = [...page.html.matchAll(/action="\/dashboard\/payments\/([\w-]+)\/complete"/g)].map(
      (m) => m[1] as string,
    );
    const [first, second] = [...new Set(ids)];
    const ok = await postForm(base, `/dashboard/payments/${first}/complete`, cookie, {
      _csrf: csrf as string,
      outcome: 'succeeded',
    });
    expect(ok.headers.get('location')).toBe('/dashboard/payments?notice=payment_succeeded');
    const failed = await postForm(base, `/dashboard/payments/${second}/complete`, cookie, {
      _csrf: csrf as string,
      outcome: 'failed',
    });
    expect(failed.headers.get('location')).toBe('/dashboard/payments?notice=payment_failed');
    const events = (await api<ApiEvent[]>(sender.keys.test, 'GET', '/events?limit=100')).body.data.map(
      (e) => `${e.type} ${e.payment_id}`,
    );
    expect(events).toContain(`payment.session.succeeded ${first}`);
    expect(events).toContain(`payment.session.failed ${second}`);

    const live = await signIn(base, sender.keys.live);
    expect((await getPage(base, '/dashboard/payments', live)).html).toContain('for test mode');
  });

  it('filters the events by type, delivery status and time; a time it cannot read is a 400 saying so', async () => {
    const cookie = await signIn(base, sender.keys.test);
    const all = await getPage(base, '/dashboard/events?type=payment.session.created', cookie);
    expect(all.html).toMatch(/Newest first: \d+ on this page\./);
    expect(
      (await getPage(base, '/dashboard/events?type=payment.session.failed&delivery_status=none', cookie))
        .html,
    ).toContain('No events match.');
    expect((await getPage(base, '/dashboard/events?created_after=2999-01-01T00:00', cookie)).html).toContain(
      'No events match.',
    );
    const since = await getPage(
      base,
      '/dashboard/events?created_after=2000-01-01T00:00:00&created_before=2999-01-01T00:00',
      cookie,
    );
    expect(since.html).toMatch(/Newest first: \d+ on this page\./);
    expect(since.html).toContain('value="2000-01-01T00:00:00"');
    const wrong = await getPage(base, '/dashboard/events?created_after=yesterday', cookie);
    expect(wrong.status).toBe(400);
    expect(wrong.html).toContain('<code>created_after</code>: must be an ISO 8601 timestamp');
  });

  it("answers a live refresh with its own business's page only, and never one older than a second", async () => {
    const refresh = (cookie: string) =>
      fetch(`${base}/dashboard/events`, { headers: { cookie, 'x-payhook-refresh': 'live' } }).then((r) =>
        r.text(),
      );
    const own = await signIn(base, sender.keys.test);
    const other = await signIn(base, sender.keys.other);
    expect(await refresh(own)).toContain(`Business <code>${BUSINESS}</code>`);
    // The same URL refreshed by another business right after: its own page, not the one just kept.
    const theirs = await refresh(other);
    expect(theirs).toContain(`Business <code>${OTHER_BUSINESS}</code>`);
    expect(theirs).not.toContain(BUSINESS);
    const eventId = await makeEvent();
    // A page opened by its user is always rendered; a refresh a second later is too.
    expect((await getPage(base, '/dashboard/events', own)).html).toContain(eventId);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect(await refresh(own)).toContain(eventId);
  });

  it('serves each session of one business its own CSRF token in a refreshed page, so its forms still post', async () => {
    const refresh = (cookie: string) =>
      fetch(`${base}/dashboard/events`, { headers: { cookie, 'x-payhook-refresh': 'live' } }).then((r) =>
        r.text(),
      );
    const tokenIn = (html: string) => /name="_csrf" value="([^"]+)"/.exec(html)?.[1];
    const first = await signIn(base, sender.keys.test);
    const second = await signIn(base, sender.keys.test);
    const firstToken = (await getPage(base, '/dashboard/events', first)).csrf as string;
    const secondToken = (await getPage(base, '/dashboard/events', second)).csrf as string;
    expect(firstToken).not.toBe(secondToken);
    // The first session's refresh renders the page; the second's, within the second, is served
    // that render: with its own token, never the first session's.
    expect(tokenIn(await refresh(first))).toBe(firstToken);
    const served = await refresh(second);
    expect(tokenIn(served)).toBe(secondToken);
    expect(served).not.toContain(firstToken);
    // A form of the refreshed page posts (signing out: 303 to the sign-in page, not a 403).
    const out = await postForm(base, '/dashboard/sign-out', second, { _csrf: tokenIn(served) as string });
    expect(out.status).toBe(303);
    expect((await getPage(base, '/dashboard/events', second)).status).toBe(303);
    expect((await getPage(base, '/dashboard/events', first)).status).toBe(200);
  });

  it("streams a business's own attempts live, and nothing of another business's", async () => {
    const stream = async (key: string) => {
      const cookie = await signIn(base, key);
      const controller = new AbortController();
      const response = await fetch(`${base}/dashboard/live`, {
        headers: { cookie },
        signal: controller.signal,
      });
      expect(response.headers.get('content-type')).toContain('text/event-stream');
      let text = '';
      const reader = response.body?.getReader();
      void (async () => {
        try {
          for (;;) {
            const chunk = await reader?.read();
            if (!chunk || chunk.done) return;
            text += Buffer.from(chunk.value).toString();
          }
        } catch {
          // Aborted.
        }
      })();
      return { read: () => text, stop: () => controller.abort() };
    };
    const own = await stream(sender.keys.test);
    const other = await stream(sender.keys.other);
    try {
      await expect.poll(own.read).toContain('event: ready');
      const eventId = await makeEvent();
      await expect.poll(own.read, { timeout: 20_000 }).toContain(eventId);
      const message = own
        .read()
        .split('\n\n')
        .find((m) => m.startsWith('event: attempts') && m.includes(eventId));
      const data = JSON.parse((message ?? '').replace(/^event: attempts\ndata: /, '')) as {
        count: number;
        attempts: Record<string, unknown>[];
      };
      expect(data.count).toBeGreaterThanOrEqual(1);
      expect(data.attempts.find((a) => a.event_id === eventId)).toMatchObject({
        event_type: 'payment.session.created',
        url: sender.webhookUrl,
        attempt: 1,
        status: 'delivered',
        status_code: 200,
        latency_ms: expect.any(Number),
        error_code: null,
      });
      expect(other.read()).not.toContain(eventId);
      expect(other.read()).not.toContain('event: attempts');
    } finally {
      own.stop();
      other.stop();
    }
  });
});
