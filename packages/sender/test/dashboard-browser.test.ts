// @module-tag browser
// @module-tag pglite
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DashboardSender, startDashboardSender } from './fixtures/dashboard.js';
import { sessionRequest } from './fixtures/requests.js';

/**
 * The dashboard in a real browser: Debian's Chromium (package `chromium`), driven by
 * playwright-core through its executable path. `.ci/run` installs the package when it is missing.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Where the main views' screenshots go (git-ignored), for a reviewer to look at. */
const SCREENSHOTS = fileURLToPath(new URL('../../../test-results/dashboard/', import.meta.url));

// The flags a headless Chromium needs on a closed network, as root in a container.
const ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

let sender: DashboardSender;
let browser: Browser;

const api = async <T>(key: string, method: string, path: string, body?: unknown) => {
  const response = await fetch(`${sender.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return ((await response.json()) as { data: T }).data;
};

/** A payment session of the test business; its `payment.session.created` event's id. */
async function makeEvent(): Promise<string> {
  const { payment } = await api<{ payment: { id: string } }>(
    sender.keys.test,
    'POST',
    '/payment-sessions',
    sessionRequest,
  );
  const [event] = await api<{ id: string }[]>(sender.keys.test, 'GET', `/events?payment_id=${payment.id}`);
  return event?.id as string;
}

/** A new browser window signed in with `key`, through the sign-in form. */
async function signedIn(key: string): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await context.newPage();
  await page.goto(`${sender.url}/dashboard`);
  await expect.poll(() => page.url()).toContain('/dashboard/sign-in');
  await shot(page, 'sign-in');
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL('**/dashboard/events');
  return { context, page };
}

/** The focused element, as the keyboard test reads it. */
interface Focused {
  tag: string | undefined;
  text: string;
  href: string;
  outline: boolean;
}

const shot = (page: Page, name: string) =>
  page.screenshot({ path: `${SCREENSHOTS}${name}.png`, fullPage: true });

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `No browser at ${CHROMIUM}: install Debian's chromium package (apt-get install chromium), or set CHROMIUM_PATH to a Chromium or Chrome binary.`,
    );
  }
  await mkdir(SCREENSHOTS, { recursive: true });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
  sender = await startDashboardSender();
  await api(sender.keys.test, 'PATCH', '/accounts/settings', { webhook_urls: [sender.webhookUrl] });
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await sender?.close();
});

describe('the dashboard in Chromium', { timeout: 90_000 }, () => {
  it('signs in, and shows a sandbox payment and its events arriving live, without a reload', async () => {
    const { context, page } = await signedIn(sender.keys.test);
    try {
      await expect.poll(() => page.locator('#live-state').textContent()).toBe('Live: connected');
      // No reload from here on: the live stream and the refresh of the table bring everything.
      let reloaded = false;
      page.on('load', () => {
        reloaded = true;
      });
      const eventId = await makeEvent();
      await page.locator('#live-log tr', { hasText: 'payment.session.created' }).first().waitFor();
      await page.locator(`#events-table a[href="/dashboard/events/${eventId}"]`).waitFor();
      expect(reloaded).toBe(false);
      await shot(page, 'events');

      // The sandbox's payments: complete one with its button, and watch its success event arrive.
      await page.getByRole('link', { name: 'Payments' }).click();
      await page.waitForURL('**/dashboard/payments');
      await page.getByRole('button', { name: /Create session/ }).click();
      await page.waitForURL('**/dashboard/payments?notice=payment_created');
      await page
        .getByRole('button', { name: /^Complete payment/ })
        .first()
        .click();
      await page.waitForURL('**/dashboard/payments?notice=payment_succeeded');
      await shot(page, 'payments');
      // The live attempts are a table on the events page (not repeated at the foot of every page).
      expect(await page.locator('#live-log').count()).toBe(0);
      await page.getByRole('link', { name: 'Events' }).click();
      await page.locator('#live-log tr', { hasText: 'payment.session.succeeded' }).first().waitFor();
    } finally {
      await context.close();
    }
  });

  it('shows a failed attempt against a receiver answering 500; redeliver, and the new attempt turns 200', async () => {
    sender.answer(500);
    const eventId = await makeEvent();
    const { context, page } = await signedIn(sender.keys.test);
    try {
      await page.goto(`${sender.url}/dashboard/events/${eventId}`);
      await page.getByText('✗ HTTP 500').first().waitFor({ timeout: 20_000 });
      await expect.poll(() => page.locator('#deliveries').textContent()).toContain('receiver broke');
      sender.answer(200);
      await page.getByRole('button', { name: 'Redeliver this event' }).click();
      await page.waitForURL(`**/dashboard/events/${eventId}?notice=redelivered`);
      await expect.poll(() => page.getByRole('status').first().textContent()).toContain('Redelivered');
      // The new delivery's attempt appears through the live stream.
      await page.getByText('✓ HTTP 200').first().waitFor({ timeout: 20_000 });
      await shot(page, 'event');
    } finally {
      await context.close();
    }
  });

  it("refuses a private webhook URL with the rule's message, lists the endpoints, and shows one's page with its charts", async () => {
    const { context, page } = await signedIn(sender.keys.test);
    try {
      await page.getByRole('link', { name: 'Endpoints' }).click();
      await page.locator('#endpoints').getByText(sender.webhookUrl).waitFor();
      await page.getByLabel('URL', { exact: true }).fill('http://10.1.2.3/webhooks');
      await page.getByRole('button', { name: 'Add endpoint' }).click();
      const alert = page.getByRole('alert');
      await alert.waitFor();
      expect(await alert.textContent()).toMatch(/The webhook URL cannot receive events\..*private/is);
      expect(await api<{ webhook_urls: string[] }>(sender.keys.test, 'GET', '/accounts/settings')).toEqual({
        require_mfa: false,
        webhook_urls: [sender.webhookUrl],
      });
      await shot(page, 'endpoints');

      // The endpoint's page: status, filter, secret on demand, the charts of its attempts so far.
      await page.locator('#endpoints').getByRole('link', { name: sender.webhookUrl }).click();
      await page.getByRole('heading', { name: sender.webhookUrl }).waitFor();
      expect(await page.locator('svg.chart').count()).toBe(2);
      expect(await page.locator('svg.chart rect.ok').count()).toBeGreaterThan(0);
      await page
        .getByText(/\(show\)/)
        .first()
        .click();
      await expect.poll(() => page.locator('code.secret').first().isVisible()).toBe(true);
      await shot(page, 'endpoint');
      // Disable and enable with the page's buttons.
      await page.getByRole('button', { name: 'Disable' }).click();
      await page.waitForURL('**notice=endpoint_disabled');
      await page.getByRole('button', { name: 'Enable' }).click();
      await page.waitForURL('**notice=endpoint_enabled');
    } finally {
      await context.close();
    }
  });

  it('fits a 390 px wide screen: no page scrolls sideways, and tables become cards', async () => {
    const { context, page } = await signedIn(sender.keys.test);
    try {
      await page.setViewportSize({ width: 390, height: 844 });
      const [endpoint] = await api<{ id: string }[]>(sender.keys.test, 'GET', '/webhook-endpoints');
      const eventId = await makeEvent();
      for (const [path, name] of [
        ['/dashboard/events', 'events-390'],
        [`/dashboard/events/${eventId}`, 'event-390'],
        ['/dashboard/endpoints', 'endpoints-390'],
        [`/dashboard/endpoints/${endpoint?.id}`, 'endpoint-390'],
        ['/dashboard/payments', 'payments-390'],
      ] as const) {
        await page.goto(`${sender.url}${path}`);
        const width = await page.evaluate<number>('document.documentElement.scrollWidth');
        expect(width, path).toBeLessThanOrEqual(390);
        await shot(page, name);
      }
    } finally {
      await context.close();
    }
  });

  it("refuses a forged form post without the CSRF token, and shows 404 for another business's event", async () => {
    const eventId = await makeEvent();
    const { context, page } = await signedIn(sender.keys.other);
    try {
      // A form as another page would build it: the right cookie (same site here), no token.
      // (Functions given as text run in the page, whose DOM this Node program has no types for.)
      await page.evaluate(`(() => {
        const form = document.createElement('form');
        form.method = 'post';
        form.action = '/dashboard/events/${eventId}/redeliver';
        document.body.append(form);
        form.submit();
      })()`);
      await page.getByRole('heading', { name: 'Refused' }).waitFor();
      expect(await page.textContent('main')).toContain('CSRF token is missing or wrong');

      const response = await page.goto(`${sender.url}/dashboard/events/${eventId}`);
      expect(response?.status()).toBe(404);
      await page.getByRole('heading', { name: 'Not found' }).waitFor();
    } finally {
      await context.close();
    }
  });

  it('works from the keyboard alone, with a visible focus: sign in, skip to content, open an event, redeliver', async () => {
    const eventId = await makeEvent();
    const context = await browser.newContext();
    const page = await context.newPage();
    /** The element that has focus: its tag, text or label, and whether an outline shows it. */
    const focused = () =>
      page.evaluate<Focused>(`(() => {
        const el = document.activeElement;
        const style = el ? getComputedStyle(el) : undefined;
        return {
          tag: el?.tagName.toLowerCase(),
          text: (el?.getAttribute('aria-label') ?? el?.textContent ?? '').trim(),
          href: el?.getAttribute('href') ?? '',
          outline: style ? style.outlineStyle !== 'none' && Number.parseFloat(style.outlineWidth) >= 2 : false,
        };
      })()`);
    /** Presses Tab until `match` has focus (at most 60 times). */
    const tabTo = async (match: (f: Focused) => boolean) => {
      for (let i = 0; i < 60; i++) {
        await page.keyboard.press('Tab');
        const f = await focused();
        if (match(f)) return f;
      }
      throw new Error('never reached by Tab');
    };
    try {
      await page.goto(`${sender.url}/dashboard/sign-in`);
      // The key field has focus on arrival.
      expect((await focused()).tag).toBe('input');
      await page.keyboard.type(sender.keys.test);
      await page.keyboard.press('Enter');
      await page.waitForURL('**/dashboard/events');

      const skip = await tabTo((f) => f.text === 'Skip to content');
      expect(skip.outline).toBe(true);
      await page.keyboard.press('Enter');
      expect((await focused()).tag).toBe('main');

      const link = await tabTo((f) => f.href === `/dashboard/events/${eventId}`);
      expect(link.outline).toBe(true);
      await page.keyboard.press('Enter');
      await page.waitForURL(`**/dashboard/events/${eventId}`);

      const button = await tabTo((f) => f.text === 'Redeliver this event');
      expect(button.outline).toBe(true);
      await page.keyboard.press('Enter');
      await page.waitForURL(`**/dashboard/events/${eventId}?notice=redelivered`);
    } finally {
      await context.close();
    }
  });
});
